"""The host dialog's password goes to the real OS keyring, never into a file.

Run under `dbus-run-session -- bash scripts/_test-in-session.sh` (a throwaway gnome-keyring).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuws.core.models import AuthMethod, SecretKind
from gpuws.core.paths import config_dir
from gpuws.core.profiles import ProfileStore
from gpuws.core.secrets import SecretStore

pytestmark = [pytest.mark.gui, pytest.mark.keyring]

SECRET = "Tr0ub4dor&3-gui-test"


def _files_containing(root: Path, needle: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def test_password_is_stored_in_the_keyring_only(make_window: Any, qtbot: Any) -> None:
    window = make_window()
    dialog = window.open_add_dialog()
    dialog.name_edit.setText("pw-host")
    dialog.host_edit.setText("10.2.3.4")
    dialog.auth_combo.setCurrentIndex(dialog.auth_combo.findData(AuthMethod.PASSWORD.value))
    dialog.secret_edit.setText(SECRET)
    with qtbot.waitSignal(window.profile_saved, timeout=10000):
        dialog.buttons.accepted.emit()
    assert SecretStore().get("pw-host", SecretKind.PASSWORD) == SECRET
    assert ProfileStore().get("pw-host").auth == AuthMethod.PASSWORD
    assert _files_containing(config_dir(), SECRET) == []

    # Renaming the host moves its keyring entry with it.
    qtbot.waitUntil(lambda: window.sidebar.current_name() == "pw-host", timeout=5000)
    edit = window.open_edit_dialog()
    assert edit.secret_edit.text() == ""  # never read back into the form
    edit.name_edit.setText("pw-host-2")
    with qtbot.waitSignal(window.profile_saved, timeout=10000):
        edit.buttons.accepted.emit()
    store = SecretStore()
    assert store.get("pw-host-2", SecretKind.PASSWORD) == SECRET
    assert store.get("pw-host", SecretKind.PASSWORD) is None

    # Removing the host removes its secret.
    qtbot.waitUntil(lambda: window.sidebar.current_name() == "pw-host-2", timeout=5000)
    with qtbot.waitSignal(window.profiles_loaded, timeout=10000):
        window.remove_host("pw-host-2")
    assert store.get("pw-host-2", SecretKind.PASSWORD) is None
    assert _files_containing(config_dir(), SECRET) == []


def test_without_a_keyring_nothing_is_saved_silently_and_the_dialog_says_so(make_window: Any, qtbot: Any) -> None:
    """Found: without a keyring the profile was written, the password dropped and the dialog closed."""
    import keyring.backends.fail

    window = make_window(secrets=SecretStore(backend=keyring.backends.fail.Keyring()))
    dialog = window.open_add_dialog()
    dialog.name_edit.setText("nokr-host")
    dialog.host_edit.setText("10.2.3.4")
    dialog.auth_combo.setCurrentIndex(dialog.auth_combo.findData(AuthMethod.PASSWORD.value))
    dialog.secret_edit.setText(SECRET)
    dialog.buttons.accepted.emit()
    assert dialog.isVisible() and dialog.secret_edit.text() == SECRET
    assert "keyring" in dialog.field_error("secret")
    assert "nokr-host" not in [p.name for p in ProfileStore().load()]
    # Without the password the host is saved and appears in the sidebar at once.
    dialog.secret_edit.clear()
    with qtbot.waitSignal(window.profile_saved, timeout=10000):
        dialog.buttons.accepted.emit()
    qtbot.waitUntil(lambda: window.sidebar.current_name() == "nokr-host", timeout=5000)
