"""The RFB client's typed errors: each says what the server did, in words (never a password)."""

from __future__ import annotations

from gpuws.core.errors import GpuwsError


class RfbError(GpuwsError):
    """The VNC server broke the protocol or a limit; the connection is closed."""


class RfbClosed(RfbError):
    """The server closed the connection (during the handshake: `during` says where)."""

    def __init__(self, during: str) -> None:
        super().__init__(f"the VNC server closed the connection during {during}")
        self.during = during


class RfbAuthFailed(RfbError):
    """The server refused the password (or the connection), with its reason when it gave one."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"VNC authentication failed: {reason}")
        self.reason = reason


class RfbTooManyFailures(RfbError):
    """The server turns this address away for a while after failed logins (TigerVNC's blacklist,
    "Too many security failures"): worth trying again after `retry_after` seconds."""

    retry_after = 10.0

    def __init__(self, reason: str) -> None:
        super().__init__(f"the VNC server refuses this address for a while: {reason}")
        self.reason = reason


class RfbUnsupported(RfbError):
    """The server asked for something this client does not speak (a version, security type, encoding)."""


class RfbLimitExceeded(RfbError):
    """The server sent something over a bound (a framebuffer size, a rectangle outside it, a zlib bomb);
    `field` names what."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"VNC server sent a bad {field}: {reason}")
        self.field = field
        self.reason = reason
