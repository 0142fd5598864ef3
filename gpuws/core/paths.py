"""Where gpuws keeps its files. `GPUWS_CONFIG_DIR` overrides everything (tests use it)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "gpuws"


def config_dir() -> Path:
    """The directory for profiles, known_hosts and settings; created on demand."""
    override = os.environ.get("GPUWS_CONFIG_DIR")
    path = Path(override) if override else Path(platformdirs.user_config_dir(APP_NAME))
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    """The directory for history: benchmark results, audit logs, cost sessions."""
    override = os.environ.get("GPUWS_CONFIG_DIR")
    path = Path(override) / "data" if override else Path(platformdirs.user_data_dir(APP_NAME))
    path.mkdir(parents=True, exist_ok=True)
    return path


def known_hosts_path() -> Path:
    """gpuws' own known_hosts file (read together with ~/.ssh/known_hosts)."""
    return config_dir() / "known_hosts"
