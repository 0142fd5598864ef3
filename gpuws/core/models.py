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
    PASSWORD = "password"  # noqa: S105 (an auth method, not a secret)
    KEYBOARD_INTERACTIVE = "keyboard-interactive"


class SecretKind(StrEnum):
    """The secrets a profile may have in the keyring (one keyring entry each)."""

    PASSWORD = "password"  # noqa: S105 (a kind of secret, not a secret)
    PASSPHRASE = "passphrase"  # noqa: S105
    TOKEN = "token"  # noqa: S105
    VNC_PASSWORD = "vnc-password"  # noqa: S105 (the per-host remote desktop password, gpuws desktop)


class AddressFrom(StrEnum):
    """Which of the instance's addresses the provider is asked for after a start (`--address-from`)."""

    PUBLIC = "public"  # the public IPv4 address (the default: what a rented host is reached at)
    PRIVATE = "private"  # the private IPv4 address (a VPN or a jump host inside the VPC)
    DNS = "dns"  # the public DNS name


@dataclass
class ProviderInfo:
    """Where the host is rented, for start/stop/resize through the provider's CLI."""

    kind: str | None = None  # "aws", "gcp", "alibaba", "tencent", "custom" or None
    instance_id: str | None = None
    region: str | None = None
    # Per-action command templates ("stop", "modify", "start", "wait") overriding the preset for
    # `kind`: argv lists with {instance_id}, {region}, {instance_type} (see gpuws.core.resize.provider).
    commands: dict[str, list[str]] = field(default_factory=dict)
    # Which address to read back from the provider after a start (None: public); a stop and start
    # gives most instances a new public address, so the profile's `host` follows it.
    address_from: AddressFrom | None = None

    @property
    def address_source(self) -> AddressFrom:
        """The address to read back after a start (public unless the profile says otherwise)."""
        return self.address_from or AddressFrom.PUBLIC


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
    # Further private keys tried after key_path, in order, as ssh tries every IdentityFile; each
    # absolute or under '~' (expanded at connect time); a missing one is skipped as ssh skips it.
    identity_files: list[str] = field(default_factory=list)
    jump: str | None = None  # name of another profile used as ProxyJump
    provider: ProviderInfo = field(default_factory=ProviderInfo)
    slice_profile: str | None = None  # current GPU slice, e.g. "full", "7x1g.10gb", "1/4"
    price_per_hour: float | None = None  # what the user pays for the current slice, per hour
    # Per-host price overrides per slice, per hour: MIG profile ("1g.10gb"), vGPU fraction ("1/4")
    # or "full" (one whole card). Unset slices derive from the full-card price by compute share.
    slice_prices: dict[str, float] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    notes: str = ""
    alerts: AlertThresholds = field(default_factory=AlertThresholds)
    budget: float | None = None  # monthly spending limit for this host (session issue)
    budget_daily: float | None = None  # daily spending limit
    budget_stop: bool = False  # stop the instance when a budget is used up (after a warning at 80 %)
    currency: str | None = None  # ISO 4217 code of every price and cost of this host; None: the locale's
    simulated: bool = False  # the built-in demo host
