"""Add/edit host, ssh-config import, settings, about and host-key dialogs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QLineEdit

from gpuws import __version__
from gpuws.core.models import AuthMethod, HostProfile, SecretKind
from gpuws.ui.about_dialog import AboutDialog
from gpuws.ui.host_dialog import HostDialog
from gpuws.ui.hostkey_dialog import HostKeyChangedPanel, HostKeyChoice, HostKeyDialog
from gpuws.ui.import_dialog import ImportSshConfigDialog
from gpuws.ui.settings import Preferences
from gpuws.ui.settings_dialog import SettingsDialog
from gpuws.ui.theme import ThemeChoice

pytestmark = pytest.mark.gui


def _dialog(qtbot: Any, **kwargs: Any) -> HostDialog:
    dialog = HostDialog(**kwargs)
    qtbot.addWidget(dialog)
    return dialog


@pytest.mark.parametrize(
    ("field", "value", "error_field"),
    [
        ("host_edit", "-oProxyCommand=touch /tmp/pwned", "host"),
        ("host_edit", "gpu.example.com; rm -rf ~", "host"),
        ("name_edit", "bad name/../x", "name"),
        ("user_edit", "-lroot", "user"),
        ("price_edit", "cheap", "price_per_hour"),
    ],
)
def test_hostile_values_are_refused_naming_the_field(qtbot: Any, field: str, value: str, error_field: str) -> None:
    dialog = _dialog(qtbot)
    dialog.name_edit.setText("gpu1")
    dialog.host_edit.setText("gpu.example.com")
    getattr(dialog, field).setText(value)
    dialog.accept()
    assert dialog.result() == 0  # still open: not accepted
    error = dialog.field_error(error_field)
    assert error, f"no error shown under {error_field}"
    others = [k for k in dialog.fields if k != error_field and dialog.field_error(k)]
    assert others == []


def test_valid_profile_is_accepted_and_secret_kept_apart(qtbot: Any) -> None:
    dialog = _dialog(qtbot)
    dialog.name_edit.setText("lambda-h100")
    dialog.host_edit.setText("2001:db8::7")
    dialog.port_spin.setValue(2222)
    dialog.user_edit.setText("ubuntu")
    dialog.auth_combo.setCurrentIndex(dialog.auth_combo.findData(AuthMethod.PASSWORD.value))
    assert dialog.secret_edit.echoMode() == QLineEdit.EchoMode.Password  # masked
    assert dialog.secret_edit.isVisibleTo(dialog)
    dialog.secret_edit.setText("hunter2-secret")
    dialog.price_edit.setText("$2.49")
    dialog.tags_edit.setText("train, h100 ,")
    dialog.accept()
    assert dialog.result() == 1
    profile = dialog.result_profile()
    assert (profile.name, profile.host, profile.port, profile.user) == ("lambda-h100", "2001:db8::7", 2222, "ubuntu")
    assert profile.price_per_hour == pytest.approx(2.49)
    assert profile.tags == ["train", "h100"]
    assert "hunter2-secret" not in repr(profile)  # the profile never carries the secret
    assert dialog.secret_kind() is SecretKind.PASSWORD and dialog.secret() == "hunter2-secret"


def test_agent_auth_hides_the_secret_field(qtbot: Any) -> None:
    dialog = _dialog(qtbot)
    dialog.auth_combo.setCurrentIndex(dialog.auth_combo.findData(AuthMethod.AGENT.value))
    assert not dialog.secret_edit.isVisibleTo(dialog)
    dialog.secret_edit.setText("leftover")
    assert dialog.secret() is None


def test_duplicate_name_refused_but_editing_keeps_own_name(qtbot: Any) -> None:
    dialog = _dialog(qtbot, existing_names=["taken"])
    dialog.name_edit.setText("taken")
    dialog.host_edit.setText("h.example.com")
    dialog.accept()
    assert "already exists" in dialog.field_error("name")
    existing = HostProfile(name="taken", host="h.example.com", port=2200, notes="keep me")
    edit = _dialog(qtbot, profile=existing, existing_names=["taken", "other"])
    assert edit.port_spin.value() == 2200
    edit.accept()
    assert edit.result() == 1 and edit.result_profile().notes == "keep me"


def test_editing_a_cloud_host_keeps_what_the_dialog_does_not_show(qtbot: Any) -> None:
    """The provider's command templates and `--address-from` survive an edit in the window (the
    dialog built a fresh provider table and dropped them)."""
    from gpuws.core.models import AddressFrom, ProviderInfo

    provider = ProviderInfo(kind="aws", instance_id="i-0abc", region="us-east-2", address_from=AddressFrom.PRIVATE,
                            commands={"stop": ["aws", "ec2", "stop-instances", "--instance-ids", "{instance_id}"]})
    existing = HostProfile(name="g6f", host="10.0.0.9", provider=provider)
    edit = _dialog(qtbot, profile=existing, existing_names=["g6f"])
    edit.region_edit.setText("us-west-2")
    edit.accept()
    kept = edit.result_profile().provider
    assert (kept.region, kept.address_from, kept.commands) == ("us-west-2", AddressFrom.PRIVATE, provider.commands)


def test_import_dialog_previews_and_reports_skipped(qtbot: Any, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(
        "Host *\n  ServerAliveInterval 30\n\n"
        "Host gpu-a\n  HostName 10.1.1.1\n  User ubuntu\n  Port 2201\n\n"
        "Host existing\n  HostName 10.1.1.2\n"
    )
    dialog = ImportSshConfigDialog(path=config, existing_names=["existing"])
    qtbot.addWidget(dialog)
    assert [p.name for p in dialog.profiles] == ["gpu-a", "existing"]
    assert [p.name for p in dialog.selected_profiles()] == ["gpu-a"]  # a taken name starts unchecked
    assert dialog.tree.topLevelItem(1).text(5) == "already exists"
    skipped = [dialog.skipped_list.topLevelItem(i).text(0) for i in range(dialog.skipped_list.topLevelItemCount())]
    assert "*" in " ".join(skipped)
    assert dialog.skipped_list.topLevelItem(0).text(1)  # with a reason
    assert dialog.import_button.isEnabled() and dialog.import_button.text() == "Import 1 host"


def test_import_dialog_missing_file_is_a_clear_error(qtbot: Any, tmp_path: Path) -> None:
    dialog = ImportSshConfigDialog(path=tmp_path / "nope")
    qtbot.addWidget(dialog)
    assert dialog.error and "no such file" in dialog.error
    assert not dialog.import_button.isEnabled()


def test_settings_dialog_round_trip_persists(qtbot: Any) -> None:
    dialog = SettingsDialog(Preferences())
    qtbot.addWidget(dialog)
    dialog.theme_combo.setCurrentIndex(dialog.theme_combo.findData(ThemeChoice.DARK))
    dialog.connect_check.setChecked(False)
    dialog.refresh_spin.setValue(2500)
    prefs = dialog.preferences()
    prefs.save()
    loaded = Preferences.load()
    assert loaded == Preferences(theme=ThemeChoice.DARK, connect_on_start=False, confirm_remove=True, refresh_ms=2500)


def test_preferences_survive_a_hand_broken_file(qtbot: Any) -> None:
    from gpuws.core.paths import config_dir
    from gpuws.ui.settings import SETTINGS_FILE

    (config_dir() / SETTINGS_FILE).write_text("[prefs]\ntheme=purple\nrefresh_ms=lots\nconnect_on_start=false\n")
    loaded = Preferences.load()
    assert loaded.theme is ThemeChoice.SYSTEM and loaded.refresh_ms == 1000 and loaded.connect_on_start is False


def test_about_mentions_version_licence_and_simulation(qtbot: Any) -> None:
    dialog = AboutDialog()
    qtbot.addWidget(dialog)
    assert __version__ in dialog.version_label.text() and "MIT" in dialog.version_label.text()
    assert "simulation" in dialog.simulation_text


class _UnknownKey(Exception):
    host, port, fingerprint = "10.0.0.9", 2222, "SHA256:abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"


@pytest.mark.parametrize(
    ("button", "choice", "accepted"),
    [
        ("cancel_button", HostKeyChoice.CANCEL, False),
        ("once_button", HostKeyChoice.ACCEPT_ONCE, True),
        ("remember_button", HostKeyChoice.ACCEPT_AND_REMEMBER, True),
    ],
)
def test_host_key_dialog_choices(qtbot: Any, button: str, choice: HostKeyChoice, accepted: bool) -> None:
    dialog = HostKeyDialog.for_error(_UnknownKey())
    qtbot.addWidget(dialog)
    assert dialog.fingerprint_label.text() == _UnknownKey.fingerprint
    assert dialog.cancel_button.isDefault()  # Enter never trusts a key
    getattr(dialog, button).click()
    assert dialog.choice is choice
    assert dialog.result() == int(accepted)


def test_changed_key_panel_names_both_fingerprints_and_the_line(qtbot: Any) -> None:
    class Changed(Exception):
        host = "gpu.example.com"
        old_fingerprint = "SHA256:OLDOLDOLD"
        new_fingerprint = "SHA256:NEWNEWNEW"

        class known:  # mirrors HostKeyChanged.known (a KnownHostEntry)
            location = "/home/u/.ssh/known_hosts:12"

    panel = HostKeyChangedPanel()
    qtbot.addWidget(panel)
    panel.show_error(Changed())
    text = panel.text()
    assert "CHANGED" in text and "SHA256:OLDOLDOLD" in text and "SHA256:NEWNEWNEW" in text
    assert "/home/u/.ssh/known_hosts:12" in text


def test_every_error_shows_at_once_and_goes_when_fixed(qtbot: Any) -> None:
    """Found: errors in the add-host dialog show one at a time and stay after the field is fixed."""
    dialog = _dialog(qtbot)
    dialog.name_edit.setText("bad name/../x")
    dialog.host_edit.setText("-oProxyCommand=x")
    dialog.user_edit.setText("-lroot")
    dialog.price_edit.setText("cheap")
    dialog.accept()
    assert dialog.result() == 0
    shown = {k for k in dialog.fields if dialog.field_error(k)}
    assert {"name", "host", "user"} <= shown
    dialog.host_edit.setText("gpu.example.com")  # fixed: its error goes as the user types
    assert dialog.field_error("host") == "" and dialog.field_error("name") and dialog.field_error("user")
    dialog.name_edit.setText("gpu1")
    dialog.user_edit.setText("ubuntu")
    assert dialog.field_error("price_per_hour")
    dialog.price_edit.setText("2.49")
    assert not any(dialog.field_error(k) for k in dialog.fields)
    dialog.accept()
    assert dialog.result() == 1


def test_without_a_keyring_the_dialog_stays_open_and_keeps_the_password(qtbot: Any) -> None:
    """Found: without a keyring the profile was written, the password dropped, the dialog closed."""
    dialog = _dialog(qtbot, keyring_problem=lambda: "no keyring backend is available")
    dialog.name_edit.setText("gpu1")
    dialog.host_edit.setText("gpu.example.com")
    dialog.auth_combo.setCurrentIndex(dialog.auth_combo.findData(AuthMethod.PASSWORD.value))
    dialog.secret_edit.setText("hunter2-secret")
    dialog.accept()
    assert dialog.result() == 0 and dialog.secret_edit.text() == "hunter2-secret"
    assert "no keyring backend is available" in dialog.field_error("secret")
    assert "hunter2" not in dialog.field_error("secret")
    dialog.secret_edit.clear()  # the user chooses to be asked at each connection
    dialog.accept()
    assert dialog.result() == 1 and dialog.secret() is None


def test_test_connection_reports_in_the_dialog(qtbot: Any) -> None:
    calls: list[tuple[str, str | None]] = []

    def tester(profile: HostProfile, secret: str | None, done: Any) -> None:
        calls.append((profile.host, secret))
        done("authentication failed for ubuntu" if secret == "wrong" else None)

    dialog = _dialog(qtbot, tester=tester)
    assert dialog.test_button.isVisibleTo(dialog)
    dialog.name_edit.setText("gpu1")
    dialog.host_edit.setText("gpu.example.com")
    dialog.auth_combo.setCurrentIndex(dialog.auth_combo.findData(AuthMethod.PASSWORD.value))
    dialog.secret_edit.setText("wrong")
    dialog.test_button.click()
    assert calls == [("gpu.example.com", "wrong")] and "authentication failed" in dialog.test_result.text()
    dialog.secret_edit.setText("right")
    dialog.test_button.click()
    assert dialog.test_result.text().startswith("Connected") and dialog.result() == 0  # nothing saved


def test_a_password_the_keyring_cannot_give_is_an_auth_problem_not_an_address() -> None:
    """Found: connecting without a keyring said "Unreachable … check the address"."""
    from gpuws.app.errors import state_for
    from gpuws.core.secrets import KeyringUnavailable
    from gpuws.ui.host_detail import _HINTS

    state = state_for(KeyringUnavailable("keyring: no keyring backend is available"))
    assert state == "auth_failed" and "address" not in _HINTS[state]


def test_the_login_prompt_names_the_host() -> None:
    """Found: the login prompt was a bare box that did not name the host."""
    from gpuws.ui.prompts import login_prompt_text

    profile = HostProfile(name="lab", host="10.0.0.5", user="ubuntu")
    title, label = login_prompt_text(profile, "lab", "", "", "Password: ")
    assert title == "Sign in to lab" and label.startswith("lab (ubuntu@10.0.0.5) asks you to sign in.")
    assert label.endswith("Password:")
    _title, spoof = login_prompt_text(profile, "lab", "other-host login", "OTP needed", "Code:")
    assert spoof.splitlines()[0].startswith("lab (") and "OTP needed" in spoof
