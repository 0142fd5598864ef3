"""Secrets (SSH passwords, key passphrases, provider tokens) live in the OS keyring only.

One keyring entry per secret: service "gpuws", username "<profile>:<kind>". Nothing here ever
writes a secret to a file, a log or an exception message, and there is no plaintext fallback:
where the keyring is unusable, `KeyringUnavailable` says so and how to fix it.

`SecretRedactionFilter` is a logging filter that blanks out every secret this process has read or
stored, as a second line of defence should one ever reach a log call.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from gpuws.core.errors import GpuwsError
from gpuws.core.models import SecretKind
from gpuws.core.stdin import check_secret
from gpuws.core.validation import validate_name

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

# `keyring` is imported where a secret is first needed, not with this module: loading it (and its
# backends' D-Bus and crypto modules) costs ~50 ms of CPU, which a command connecting with a key
# file (`gpuws cp`, `gpuws tunnel`: every host link builds a SecretStore) never needs to spend.

SERVICE = "gpuws"
REDACTED = "********"

log = logging.getLogger(__name__)

FIX_HINT = (
    "install and unlock a keyring (gnome-keyring or KWallet on Linux; the system keychain on "
    "macOS and Windows), or set PYTHON_KEYRING_BACKEND to a secure keyring backend"
)


class KeyringUnavailable(GpuwsError):
    """No usable OS keyring: secrets cannot be stored or read (and are never kept elsewhere)."""


class SecretRedactionFilter(logging.Filter):
    """Replace every registered secret in a log record's message and traceback with asterisks.

    Install it on handlers (`install_redaction`), not on loggers: a logger's filters do not see
    records propagated from its children.
    """

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()
        self._guard = threading.Lock()

    def register(self, secret: str) -> None:
        """Redact `secret` from now on (empty strings are ignored: they would match everywhere)."""
        if secret:
            with self._guard:
                self._secrets.add(secret)

    def redact(self, text: str) -> str:
        """`text` with every registered secret replaced (longest first, so none leaks partly)."""
        with self._guard:
            secrets = sorted(self._secrets, key=len, reverse=True)
        for secret in secrets:
            text = text.replace(secret, REDACTED)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = self.redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        return True


#: The process-wide filter that `SecretStore` registers every secret it touches with.
redaction_filter = SecretRedactionFilter()


def install_redaction(handler: logging.Handler | None = None) -> None:
    """Attach `redaction_filter` to `handler`, or to every handler of the root logger."""
    handlers = [handler] if handler is not None else logging.getLogger().handlers
    for each in handlers:
        if redaction_filter not in each.filters:
            each.addFilter(redaction_filter)


def describe_backend(backend: KeyringBackend) -> str:
    """A short name for the backend, e.g. "SecretService" (for messages)."""
    module = type(backend).__module__.rsplit(".", 1)[-1]
    return module if type(backend).__name__ == "Keyring" else type(backend).__name__


def unusable_reason(backend: KeyringBackend) -> str | None:
    """Why this backend cannot hold gpuws' secrets, or None when it can."""
    import keyring.backends.chainer
    import keyring.backends.fail
    import keyring.backends.null

    if isinstance(backend, keyring.backends.fail.Keyring):
        return "no keyring backend is available"
    if isinstance(backend, keyring.backends.null.Keyring):
        return "the keyring backend is the 'null' backend, which stores nothing"
    if "plaintext" in type(backend).__qualname__.lower():
        return f"the keyring backend {type(backend).__qualname__} stores secrets as plain text"
    if isinstance(backend, keyring.backends.chainer.ChainerBackend):
        usable = [b for b in backend.backends if unusable_reason(b) is None]
        if not usable:
            return "no keyring backend is available"
    return None


class SecretStore:
    """Read and write one profile's secrets in the OS keyring."""

    def __init__(self, service: str = SERVICE, backend: KeyringBackend | None = None) -> None:
        self.service = service
        # None: whatever `keyring` selects for this system (resolved lazily, it may probe D-Bus).
        self._backend = backend

    @property
    def backend(self) -> KeyringBackend:
        if self._backend is None:
            try:
                import keyring

                self._backend = keyring.get_keyring()
            except Exception as exc:
                # A misspelt PYTHON_KEYRING_BACKEND raises ImportError, AttributeError or
                # ValueError from inside keyring; whichever it is, there is no usable keyring.
                raise KeyringUnavailable(
                    f"keyring: no usable keyring (the keyring backend could not be loaded: "
                    f"{type(exc).__name__}); {FIX_HINT}. gpuws never stores secrets elsewhere."
                ) from None
        return self._backend

    def ensure_usable(self) -> None:
        """Raise KeyringUnavailable (with how to fix it) unless secrets can be stored."""
        reason = unusable_reason(self.backend)
        if reason is not None:
            raise KeyringUnavailable(f"keyring: {reason}; {FIX_HINT}. gpuws never stores secrets elsewhere.")

    def set(self, profile_name: str, kind: SecretKind, value: str) -> None:
        """Store (or replace) a secret."""
        check_secret(value, "secret")  # the same rule for the window as for stdin: text, 64 KiB, no NUL
        import keyring.errors

        redaction_filter.register(value)
        username = self._username(profile_name, kind)
        self.ensure_usable()
        try:
            self.backend.set_password(self.service, username, value)
        except keyring.errors.KeyringError as exc:
            raise self._failure("store", kind, profile_name, exc) from None
        log.info("stored the %s of %r in the %s keyring", kind, profile_name, describe_backend(self.backend))

    def get(self, profile_name: str, kind: SecretKind) -> str | None:
        """The stored secret, or None when there is none."""
        import keyring.errors

        username = self._username(profile_name, kind)
        self.ensure_usable()
        try:
            value = self.backend.get_password(self.service, username)
        except keyring.errors.KeyringError as exc:
            raise self._failure("read", kind, profile_name, exc) from None
        if value is not None:
            redaction_filter.register(value)
        return value

    def clear(self, profile_name: str, kind: SecretKind) -> bool:
        """Delete a secret; False when there was none."""
        import keyring.errors

        username = self._username(profile_name, kind)
        self.ensure_usable()
        if self.get(profile_name, kind) is None:
            return False
        try:
            self.backend.delete_password(self.service, username)
        except keyring.errors.PasswordDeleteError:
            return False  # deleted by someone else in between
        except keyring.errors.KeyringError as exc:
            raise self._failure("delete", kind, profile_name, exc) from None
        log.info("deleted the %s of %r from the keyring", kind, profile_name)
        return True

    def clear_all(self, profile_name: str) -> list[SecretKind]:
        """Delete every kind of secret of a profile; returns the kinds that existed."""
        return [kind for kind in SecretKind if self.clear(profile_name, kind)]

    def move(self, old_name: str, new_name: str) -> None:
        """Re-key a renamed profile's secrets (copy, then delete the old entries)."""
        for kind in SecretKind:
            value = self.get(old_name, kind)
            if value is not None:
                self.set(new_name, kind, value)
                self.clear(old_name, kind)

    @staticmethod
    def _username(profile_name: str, kind: SecretKind) -> str:
        # Names cannot contain ':', so "<profile>:<kind>" is unambiguous.
        return f"{validate_name(profile_name)}:{SecretKind(kind).value}"

    @staticmethod
    def _failure(action: str, kind: SecretKind, name: str, exc: Exception) -> KeyringUnavailable:
        # The backend's message names the cause (locked, D-Bus error); it never contains the value,
        # and the filter would catch it if a backend ever did.
        detail = redaction_filter.redact(str(exc)) or type(exc).__name__
        return KeyringUnavailable(
            f"keyring: could not {action} the {kind} of {name!r}: {detail}; "
            "is the keyring unlocked? "
            f"({FIX_HINT})"
        )
