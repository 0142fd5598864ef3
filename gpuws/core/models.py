"""Session profiles: what gpuws knows about one host the user rents.

A profile never holds a secret: passwords, key passphrases and provider tokens live in the OS
keyring (see `gpuws.core.secrets`), keyed by the profile's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class AuthMethod(StrEnum):
    AGENT = "agent"
    KEY = "key"
    PASSWORD = "password"
    KEYBOARD_INTERACTIVE = "keyboard-interactive"


class SecretKind(StrEnum):
    """The secrets a profile may have in the keyring (one keyring entry each)."""

    PASSWORD = "password"
    PASSPHRASE = "passphrase"
    TOKEN = "token"


@dataclass
class ProviderInfo:
    """Where the host is rented, for start/stop/resize through the provider's CLI."""

    kind: str | None = None  # "aws", "gcp", "alibaba", "tencent", "custom" or None
    instance_id: str | None = None
    region: str | None = None


@dataclass
class AlertThresholds:
    """Per-profile alert thresholds (telemetry issue)."""

    mem_used_pct: float = 90.0
    idle_util_pct: float = 5.0
    idle_minutes: float = 15.0
    temp_c: float | None = None  # None: rely on the driver's thermal throttle reasons


@dataclass
class HostProfile:
    """One host the user connects to. `name` is the key everywhere (CLI, keyring, files)."""

    name: str
    host: str
    port: int = 22
    user: str | None = None
    auth: AuthMethod = AuthMethod.AGENT
    key_path: str | None = None
    jump: str | None = None  # name of another profile used as ProxyJump
    provider: ProviderInfo = field(default_factory=ProviderInfo)
    slice_profile: str | None = None  # current GPU slice, e.g. "full", "7x1g.10gb", "1/4"
    price_per_hour: float | None = None  # what the user pays for the current slice, per hour
    tags: list[str] = field(default_factory=list)
    notes: str = ""
    alerts: AlertThresholds = field(default_factory=AlertThresholds)
    budget: float | None = None  # spending limit for this host (session issue)
    simulated: bool = False  # the built-in demo host
