"""Errors the core raises. Every message is meant to be shown to a user as it is."""


class GpuwsError(Exception):
    """Base of all errors gpuws reports to a user (one clear line, never a secret)."""


class RefusedInput(GpuwsError):
    """Input from the user was refused before anything was done (the CLI's exit status 2)."""


class ValidationError(RefusedInput):
    """A field value was refused; `field` names which one."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class ParseError(GpuwsError):
    """Output from a host (nvidia-smi, an agent) was not what we expected."""


class NoNvidiaDriver(GpuwsError):
    """The host is reachable but has no NVIDIA driver (nvidia-smi is missing)."""


class ConnectionLost(GpuwsError):
    """The connection dropped and did not come back within the reconnect timeout."""
