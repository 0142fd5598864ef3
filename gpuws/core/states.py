"""The connection state of a host: a value type every layer reads (the app layer decides it)."""

from __future__ import annotations

from enum import StrEnum


class ConnectionState(StrEnum):
    """Where a host's connection stands, as the window and `--json` output name it."""

    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    RECONNECTING = "reconnecting"
    AUTH_FAILED = "auth_failed"
    HOST_KEY_CHANGED = "host_key_changed"
    HOST_KEY_UNKNOWN = "host_key_unknown"
    UNREACHABLE = "unreachable"
    NO_DRIVER = "no_driver"
