"""Where gpuws keeps its files. `GPUWS_CONFIG_DIR` overrides everything (tests use it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Literal

APP_NAME = "gpuws"


def config_dir() -> Path:
    """The directory for profiles, known_hosts and settings; created on demand."""
    override = os.environ.get("GPUWS_CONFIG_DIR")
    path = Path(override) if override else user_dir("config")
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dir() -> Path:
    """The directory for history: benchmark results, audit logs, cost sessions."""
    override = os.environ.get("GPUWS_CONFIG_DIR")
    path = Path(override) / "data" if override else user_dir("data")
    path.mkdir(parents=True, exist_ok=True)
    return path


# kind -> (its XDG variable, its default under the home directory)
_XDG = {"config": ("XDG_CONFIG_HOME", ".config"), "data": ("XDG_DATA_HOME", ".local/share")}


def user_dir(kind: Literal["config", "data"]) -> Path:
    """platformdirs' `user_config_dir("gpuws")` ("config") or `user_data_dir("gpuws")` ("data").

    On Linux the XDG base directory rules are applied here, as platformdirs applies them: the
    variable when it holds an absolute path (a relative one is ignored, as the spec says), else the
    default under an absolute `$HOME`. Importing platformdirs costs ~5 ms (it imports tempfile,
    random and hashlib), an eighth of `gpuws hosts list` (#35); every other case (macOS, Windows,
    Android, no usable `$HOME`) is platformdirs' own (tests/core/test_paths.py compares them).
    """
    variable, default = _XDG[kind]
    if sys.platform == "linux" and "ANDROID_DATA" not in os.environ and not hasattr(sys, "getandroidapilevel"):
        base = os.environ.get(variable, "")
        if os.path.isabs(base):
            return Path(base, APP_NAME)
        home = os.environ.get("HOME", "")
        if os.path.isabs(home):
            return Path(home, default, APP_NAME)
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME) if kind == "config" else platformdirs.user_data_dir(APP_NAME))


def known_hosts_path() -> Path:
    """gpuws' own known_hosts file (read together with ~/.ssh/known_hosts)."""
    return config_dir() / "known_hosts"
