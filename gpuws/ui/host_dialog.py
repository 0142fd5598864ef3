"""Add or edit a host. Secrets typed here go to the OS keyring, never into the profile.

Every field's problem is shown at once, under its field, and goes away as soon as the field is
fixed. A typed password with no usable keyring keeps the dialog open and says so: it is never
dropped silently. "Test connection" connects with what is typed, without saving anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from PySide6.QtCore import Qt
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

from gpuws.core import validation as checks
from gpuws.core.errors import ValidationError
from gpuws.core.models import AuthMethod, HostProfile, SecretKind
from gpuws.ui import theme
from gpuws.ui.widgets import TintedLabel

# A connection test: given the typed profile and secret, calls back with None (it worked) or
# the reason it did not, on the GUI thread.
ConnectionTester = Callable[[HostProfile, str | None, Callable[[str | None], None]], None]

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
        keyring_problem: Callable[[], str | None] | None = None,
        tester: ConnectionTester | None = None,
    ) -> None:
        super().__init__(parent)
        self._keyring_problem = keyring_problem
        self._tester = tester
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
        self.test_button = self.buttons.addButton("Test connection", QDialogButtonBox.ButtonRole.ActionRole)
        self.test_button.setToolTip("Connect with these settings now, without saving them")
        self.test_button.clicked.connect(self.test_connection)
        self.test_button.setVisible(tester is not None)
        self.test_result = QLabel("", self)
        self.test_result.setWordWrap(True)
        self.test_result.setTextFormat(Qt.TextFormat.PlainText)  # errors may quote remote text
        self.test_result.hide()
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.test_result)
        layout.addWidget(self.buttons)
        for field in self.fields.values():
            _on_edit(field.editor, self._recheck)

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
        errors = self.problems()
        self._show_errors(errors)
        if errors:
            first = next(iter(errors))
            self.fields[_field_key(first)].editor.setFocus()
            return
        profile = _validate(self._collect())
        if self.secret() is not None and self._keyring_problem is not None:
            problem = self._keyring_problem()
            if problem is not None:
                # Keep the dialog (and the typed password) rather than save a host whose password is lost.
                self.show_error("secret", f"cannot be saved: {problem}. Leave it empty to be asked at each "
                                "connection, or set up a keyring and save again.")
                return
        self._result = profile
        super().accept()

    def problems(self) -> dict[str, str]:
        """Every field's problem at once: {field: reason} (empty when the form is valid)."""
        errors: dict[str, str] = {}
        name = self.name_edit.text().strip()
        field_checks: tuple[tuple[str, Callable[[], object]], ...] = (
            ("name", lambda: checks.validate_name(name)),
            ("host", lambda: checks.validate_host(self.host_edit.text().strip())),
            ("user", lambda: checks.validate_user(self.user_edit.text().strip() or None)),
            ("key_path", lambda: checks.validate_key_path(self.key_edit.text().strip() or None)),
            ("slice_profile", lambda: checks.validate_slice_profile(self.slice_edit.text().strip() or None)),
            ("notes", lambda: checks.validate_notes(self.notes_edit.toPlainText())),
        )
        for key, check in field_checks:
            try:
                check()
            except ValidationError as exc:
                errors[key] = exc.reason
        if name and "name" not in errors and name in self._taken:
            errors["name"] = f"a host named {name!r} already exists"
        if self._auth() is AuthMethod.KEY and not self.key_edit.text().strip() and "key_path" not in errors:
            errors["key_path"] = "is required for key authentication"
        try:
            profile = self._collect()
        except ValidationError as exc:
            errors.setdefault(_field_key(exc.field), exc.reason)
            return errors
        if not errors:
            try:
                _validate(profile)
            except ValidationError as exc:
                errors[_field_key(exc.field)] = exc.reason
        return errors

    def _show_errors(self, errors: dict[str, str]) -> None:
        for key, field in self.fields.items():
            reason = errors.get(key)
            field.set_error(self._prefixed(key, reason) if reason else None)

    def _recheck(self) -> None:
        # Only once errors are on screen: fixed fields lose their error as the user types.
        if any(f.error.isVisibleTo(self) or f.error.text() for f in self.fields.values()):
            self._show_errors(self.problems())

    def _prefixed(self, key: str, reason: str) -> str:
        label = self._labels.get(key)
        return f"{label.text()}: {reason}" if label is not None else f"{key}: {reason}"

    def show_error(self, field: str, reason: str) -> None:
        """Show `reason` under the named field and focus it."""
        key = _field_key(field)
        target = self.fields.get(key) or self.fields["name"]
        target.set_error(self._prefixed(key, reason) if key in self.fields else f"{field}: {reason}")
        target.editor.setFocus()

    def test_connection(self) -> None:
        """Connect with the typed settings (nothing is saved); the outcome shows above the buttons."""
        errors = self.problems()
        self._show_errors(errors)
        if errors or self._tester is None:
            return
        self.test_button.setEnabled(False)
        self._show_test("Connecting…", None)
        self._tester(_validate(self._collect()), self.secret(), self._on_tested)

    def _on_tested(self, problem: str | None) -> None:
        self.test_button.setEnabled(True)
        if problem is None:
            self._show_test("Connected: these settings work.", False)
        else:
            self._show_test(f"Could not connect: {problem}", True)

    def _show_test(self, text: str, failed: bool | None) -> None:
        self.test_result.setText(text)
        pal = self.palette()
        colour = theme.error_colour(pal) if failed else (theme.state_colour("connected", pal) if failed is False
                                                            else theme.muted_text_colour(pal))
        self.test_result.setStyleSheet(f"color: {colour.name()}")
        self.test_result.show()

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
            # What the dialog does not show (command templates, --address-from) is kept.
            provider=replace(
                base.provider,
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


def _field_key(field: str) -> str:
    """The form field a core validation error names."""
    return {"identity_file": "key_path", "key": "key_path", "price": "price_per_hour",
            "provider.kind": "provider"}.get(field, field)


def _on_edit(editor: QWidget, slot: Callable[[], object]) -> None:
    for signal in ("textChanged", "valueChanged", "currentIndexChanged"):
        if hasattr(editor, signal):
            getattr(editor, signal).connect(lambda *_: slot())
            return


def _validate(profile: HostProfile) -> HostProfile:
    """The core's checks (hostile names, option smuggling, key files); returns the normalised profile."""
    from gpuws.core.validation import validate_profile

    return validate_profile(profile)
