"""Secrets in the OS keyring: a real Secret Service (gnome-keyring) for storage, and the refusals."""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator

import keyring
import keyring.backends.chainer
import keyring.backends.fail
import keyring.backends.null
import pytest
from keyring.backend import KeyringBackend

from gpuws.core.errors import ValidationError
from gpuws.core.models import SecretKind
from gpuws.core.secrets import (
    REDACTED,
    KeyringUnavailable,
    SecretRedactionFilter,
    SecretStore,
    install_redaction,
    redaction_filter,
)


@pytest.fixture
def profile_name() -> Iterator[str]:
    """A name no other test uses, and no entries left behind in the keyring afterwards."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    for kind in SecretKind:
        with contextlib.suppress(keyring.errors.KeyringError):
            keyring.delete_password("gpuws", f"{name}:{kind}")


@pytest.mark.keyring
def test_the_real_keyring_stores_one_entry_per_secret(profile_name: str) -> None:
    store = SecretStore()
    store.ensure_usable()
    assert "SecretService" in type(store.backend).__module__
    store.set(profile_name, SecretKind.PASSWORD, "pw-1 with spaces")
    store.set(profile_name, SecretKind.TOKEN, "tok-2")
    # Laid out as the contract says: service "gpuws", username "<profile>:<kind>".
    assert keyring.get_password("gpuws", f"{profile_name}:password") == "pw-1 with spaces"
    assert keyring.get_password("gpuws", f"{profile_name}:token") == "tok-2"
    assert store.get(profile_name, SecretKind.PASSPHRASE) is None
    store.set(profile_name, SecretKind.PASSWORD, "pw-replaced")
    assert SecretStore().get(profile_name, SecretKind.PASSWORD) == "pw-replaced"
    assert store.clear(profile_name, SecretKind.PASSWORD) is True
    assert store.clear(profile_name, SecretKind.PASSWORD) is False
    assert store.get(profile_name, SecretKind.PASSWORD) is None
    assert store.clear_all(profile_name) == [SecretKind.TOKEN]


@pytest.mark.keyring
def test_move_rekeys_a_renamed_profile(profile_name: str) -> None:
    store = SecretStore()
    new_name = profile_name + "-new"
    store.set(profile_name, SecretKind.PASSPHRASE, "phrase")
    try:
        store.move(profile_name, new_name)
        assert store.get(new_name, SecretKind.PASSPHRASE) == "phrase"
        assert store.get(profile_name, SecretKind.PASSPHRASE) is None
    finally:
        store.clear_all(new_name)


@pytest.mark.parametrize(
    "backend",
    [
        keyring.backends.fail.Keyring(),
        keyring.backends.null.Keyring(),
        type("EmptyChainer", (keyring.backends.chainer.ChainerBackend,), {"backends": []})(),
    ],
    ids=["fail", "null", "empty-chainer"],
)
def test_unusable_backends_are_refused_with_how_to_fix(backend: KeyringBackend) -> None:
    store = SecretStore(backend=backend)
    for attempt in (
        store.ensure_usable,
        lambda: store.set("box", SecretKind.PASSWORD, "never-stored"),
        lambda: store.get("box", SecretKind.PASSWORD),
        lambda: store.clear("box", SecretKind.PASSWORD),
    ):
        with pytest.raises(KeyringUnavailable) as err:
            attempt()
        message = str(err.value)
        assert "gnome-keyring" in message
        assert "PYTHON_KEYRING_BACKEND" in message
        assert "never-stored" not in message


def test_a_plaintext_backend_is_refused() -> None:
    class PlaintextKeyring(KeyringBackend):
        """Stands in for keyrings.alt's file backend."""

        priority = 1  # type: ignore[assignment]
        viable = False  # never picked by keyring's own backend discovery in later tests

        def get_password(self, service: str, username: str) -> str | None:
            return None

        def set_password(self, service: str, username: str, password: str) -> None:
            raise AssertionError("must never be called")

        def delete_password(self, service: str, username: str) -> None:
            raise AssertionError("must never be called")

    with pytest.raises(KeyringUnavailable, match="plain text"):
        SecretStore(backend=PlaintextKeyring()).ensure_usable()


def test_profile_names_are_validated_before_touching_the_keyring() -> None:
    with pytest.raises(ValidationError):
        SecretStore(backend=keyring.backends.null.Keyring()).get("a:b", SecretKind.PASSWORD)


def test_redaction_filter_blanks_registered_secrets_everywhere(caplog: pytest.LogCaptureFixture) -> None:
    flt = SecretRedactionFilter()
    flt.register("s3cret-value")
    flt.register("")  # ignored: would otherwise match everything
    logger = logging.getLogger("gpuws.test.redaction")
    logger.addFilter(flt)
    try:
        with caplog.at_level(logging.INFO, logger="gpuws.test.redaction"):
            logger.info("password is %s", "s3cret-value")
            logger.info("plain message")
            try:
                raise RuntimeError("failed with s3cret-value")
            except RuntimeError:
                logger.exception("oops")
    finally:
        logger.removeFilter(flt)
    assert [r.getMessage() for r in caplog.records] == [f"password is {REDACTED}", "plain message", "oops"]
    assert "s3cret-value" not in caplog.text
    assert REDACTED in caplog.text  # the traceback text was redacted, not dropped


def test_redaction_replaces_longer_secrets_first() -> None:
    flt = SecretRedactionFilter()
    flt.register("abc")
    flt.register("abcdef")
    assert flt.redact("x abcdef y") == f"x {REDACTED} y"


def test_install_redaction_adds_the_shared_filter_to_a_handler_once() -> None:
    handler = logging.NullHandler()
    install_redaction(handler)
    install_redaction(handler)
    assert handler.filters == [redaction_filter]
