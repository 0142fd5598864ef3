"""Add or edit a host. Secrets typed here go to the OS keyring, never into the profile."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from gpuws.core.errors import ValidationError
from gpuws.core.models import AuthMethod, HostProfile, ProviderInfo, SecretKind
from gpuws.ui import theme
from gpuws.ui.widgets import TintedLabel

_AUTH_LABELS = {
    AuthMethod.AGENT: "SSH agent",
    AuthMethod.KEY: "Key file",
    AuthMethod.PASSWORD: "Password",
    AuthMethod.KEYBOARD_INTERACTIVE: "Keyboard-interactive (asks each time)",
}
_PROVIDERS = ["", "aws", "gcp", "alibaba", "tencent", "custom"]


class _Field(QWidget):
    """An input with an error line under it (hidden until a validation error names the field)."""

    def __init__(self, editor: QWidget, extra: QWidget | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.editor = editor
        self.error = TintedLabel("", theme.error_colour, self)
        self.error.setWordWrap(True)
        self.error.hide()
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(editor, 1)
        if extra is not None:
            row.addWidget(extra)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(row)
        layout.addWidget(self.error)

    def set_error(self, message: str | None) -> None:
        self.error.setText(message or "")
        self.error.setVisible(bool(message))


class HostDialog(QDialog):
    """The add/edit form. After `exec()` returns Accepted, read `result_profile()` and `secret()`."""

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        profile: HostProfile | None = None,
        existing_names: Iterable[str] = (),
        has_secret: bool = False,
    ) -> None:
        super().__init__(parent)
        self._original = profile
        self._taken = {n for n in existing_names if profile is None or n != profile.name}
        self._result: HostProfile | None = None
        self.setWindowTitle("Edit host" if profile else "Add host")
        self.setMinimumWidth(480)

        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("e.g. lambda-h100")
        self.host_edit = QLineEdit()
        self.host_edit.setPlaceholderText("DNS name, IPv4 or IPv6 address")
        self.port_spin = QSpinBox()
        self.port_spin.setRange(1, 65535)
        self.port_spin.setValue(22)
        self.user_edit = QLineEdit()
        self.user_edit.setPlaceholderText("login user (optional)")
        self.auth_combo = QComboBox()
        for method, text in _AUTH_LABELS.items():
            self.auth_combo.addItem(text, method.value)
        self.key_edit = QLineEdit()
        self.key_edit.setPlaceholderText("~/.ssh/id_ed25519")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse_key)
        self.secret_edit = QLineEdit()
        self.secret_edit.setEchoMode(QLineEdit.EchoMode.Password)  # never shown, never in a screenshot
        self._has_secret = has_secret
        self.jump_combo = QComboBox()
        self.jump_combo.addItem("(none)", None)
        for name in sorted(self._taken):
            self.jump_combo.addItem(name, name)
        self.provider_combo = QComboBox()
        for kind in _PROVIDERS:
            self.provider_combo.addItem(kind or "(none)", kind or None)
        self.instance_edit = QLineEdit()
        self.region_edit = QLineEdit()
        self.slice_edit = QLineEdit()
        self.slice_edit.setPlaceholderText("full, 7x1g.10gb, 1/4 …")
        self.price_edit = QLineEdit()
        self.price_edit.setPlaceholderText("USD per hour, e.g. 2.49")
        self.tags_edit = QLineEdit()
        self.tags_edit.setPlaceholderText("comma separated")
        self.notes_edit = QPlainTextEdit()
        self.notes_edit.setFixedHeight(60)

        self.fields: dict[str, _Field] = {
            "name": _Field(self.name_edit),
            "host": _Field(self.host_edit),
            "port": _Field(self.port_spin),
            "user": _Field(self.user_edit),
            "auth": _Field(self.auth_combo),
            "key_path": _Field(self.key_edit, browse),
            "secret": _Field(self.secret_edit),
            "jump": _Field(self.jump_combo),
            "provider": _Field(self.provider_combo),
            "instance_id": _Field(self.instance_edit),
            "region": _Field(self.region_edit),
            "slice_profile": _Field(self.slice_edit),
            "price_per_hour": _Field(self.price_edit),
            "tags": _Field(self.tags_edit),
            "notes": _Field(self.notes_edit),
        }
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        labels = {
            "name": "Name", "host": "Host", "port": "Port", "user": "User", "auth": "Authentication",
            "key_path": "Key file", "secret": "Password", "jump": "Jump host", "provider": "Provider",
            "instance_id": "Instance id", "region": "Region", "slice_profile": "GPU slice",
            "price_per_hour": "Price", "tags": "Tags", "notes": "Notes",
        }  # fmt: skip
        self._labels: dict[str, QLabel] = {}
        for key, field in self.fields.items():
            label = QLabel(labels[key])
            label.setBuddy(field.editor)
            self._labels[key] = label
            form.addRow(label, field)

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.buttons)

        if profile is not None:
            self._fill(profile)
        self.auth_combo.currentIndexChanged.connect(self._update_auth_fields)
        self._update_auth_fields()

    # -- results --------------------------------------------------------------------------------

    def result_profile(self) -> HostProfile:
        """The validated profile (valid only after the dialog was accepted)."""
        assert self._result is not None, "the dialog was not accepted"
        return self._result

    def secret_kind(self) -> SecretKind | None:
        """Which keyring entry the secret field fills for the chosen auth method."""
        method = self._auth()
        if method == AuthMethod.PASSWORD:
            return SecretKind.PASSWORD
        if method == AuthMethod.KEY:
            return SecretKind.PASSPHRASE
        return None

    def secret(self) -> str | None:
        """The password/passphrase typed, or None when left empty (keep what the keyring has)."""
        text = self.secret_edit.text()
        return text if text and self.secret_kind() is not None else None

    # -- behaviour ------------------------------------------------------------------------------

    def accept(self) -> None:
        for field in self.fields.values():
            field.set_error(None)
        try:
            profile = _validate(self._collect())
            if profile.name in self._taken:
                raise ValidationError("name", f"a host named {profile.name!r} already exists")
        except ValidationError as exc:
            self.show_error(exc.field, exc.reason)
            return
        self._result = profile
        super().accept()

    def show_error(self, field: str, reason: str) -> None:
        """Show `reason` under the named field and focus it."""
        key = {"identity_file": "key_path", "key": "key_path", "price": "price_per_hour"}.get(field, field)
        target = self.fields.get(key) or self.fields["name"]
        label = self._labels.get(key)
        prefix = f"{label.text()}: " if label is not None and key in self.fields else f"{field}: "
        target.set_error(prefix + reason)
        target.editor.setFocus()

    def field_error(self, field: str) -> str:
        """The error shown under `field` ('' when none): for tests and accessibility."""
        return self.fields[field].error.text()

    def _collect(self) -> HostProfile:
        price_text = self.price_edit.text().strip().lstrip("$")
        price: float | None = None
        if price_text:
            try:
                price = float(price_text)
            except ValueError:
                raise ValidationError("price_per_hour", "must be a number such as 2.49") from None
            if price < 0 or price != price or price == float("inf"):
                raise ValidationError("price_per_hour", "must be zero or more")
        method = self._auth()
        base = self._original or HostProfile(name="", host="")
        return replace(
            base,
            name=self.name_edit.text().strip(),
            host=self.host_edit.text().strip(),
            port=self.port_spin.value(),
            user=self.user_edit.text().strip() or None,
            auth=method,
            key_path=self.key_edit.text().strip() or None,
            jump=self.jump_combo.currentData(),
            provider=ProviderInfo(
                kind=self.provider_combo.currentData(),
                instance_id=self.instance_edit.text().strip() or None,
                region=self.region_edit.text().strip() or None,
            ),
            slice_profile=self.slice_edit.text().strip() or None,
            price_per_hour=price,
            tags=[t.strip() for t in self.tags_edit.text().split(",") if t.strip()],
            notes=self.notes_edit.toPlainText(),
        )

    def _fill(self, p: HostProfile) -> None:
        self.name_edit.setText(p.name)
        self.host_edit.setText(p.host)
        self.port_spin.setValue(p.port)
        self.user_edit.setText(p.user or "")
        self.auth_combo.setCurrentIndex(max(0, self.auth_combo.findData(AuthMethod(p.auth).value)))
        self.key_edit.setText(p.key_path or "")
        if p.jump:
            if self.jump_combo.findData(p.jump) < 0:
                self.jump_combo.addItem(p.jump, p.jump)
            self.jump_combo.setCurrentIndex(self.jump_combo.findData(p.jump))
        kind = p.provider.kind or None
        if kind is not None and self.provider_combo.findData(kind) < 0:
            self.provider_combo.addItem(kind, kind)
        self.provider_combo.setCurrentIndex(max(0, self.provider_combo.findData(kind)))
        self.instance_edit.setText(p.provider.instance_id or "")
        self.region_edit.setText(p.provider.region or "")
        self.slice_edit.setText(p.slice_profile or "")
        self.price_edit.setText("" if p.price_per_hour is None else f"{p.price_per_hour:g}")
        self.tags_edit.setText(", ".join(p.tags))
        self.notes_edit.setPlainText(p.notes)

    def _auth(self) -> AuthMethod:
        # Qt hands enum data back as its plain string value.
        return AuthMethod(str(self.auth_combo.currentData()))

    def _update_auth_fields(self) -> None:
        kind = self.secret_kind()
        method = self._auth()
        self.fields["key_path"].setEnabled(method in (AuthMethod.KEY, AuthMethod.AGENT))
        self.fields["secret"].setVisible(kind is not None)
        self._labels["secret"].setVisible(kind is not None)
        self._labels["secret"].setText("Key passphrase" if kind is SecretKind.PASSPHRASE else "Password")
        stored = "stored in the OS keyring — leave empty to keep it" if self._has_secret else "saved in the OS keyring"
        self.secret_edit.setPlaceholderText(stored)

    def _browse_key(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose an SSH private key")
        if path:
            self.key_edit.setText(path)


def _validate(profile: HostProfile) -> HostProfile:
    """The core's checks (hostile names, option smuggling, key files); returns the normalised profile."""
    from gpuws.core.validation import validate_profile

    return validate_profile(profile)
