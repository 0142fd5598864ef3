"""Host keys in the GUI: ask about an unknown key; refuse a changed one, loudly.

Both read their facts from the remote layer's errors (`UnknownHostKey`, `HostKeyChanged`) by
attribute, and show SHA256 fingerprints exactly as `ssh-keygen -l` prints them.
"""

from __future__ import annotations

from enum import StrEnum

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from gpuws.ui.widgets import Banner, BannerKind, heading, muted_label


class HostKeyChoice(StrEnum):
    CANCEL = "cancel"
    ACCEPT_ONCE = "accept_once"  # trust for this connection only
    ACCEPT_AND_REMEMBER = "accept_and_remember"  # add to gpuws' known_hosts


def _first(obj: object, *names: str) -> str:
    for name in names:
        value = getattr(obj, name, None)
        if value not in (None, ""):
            return str(value)
    return ""


def _mono(text: str, parent: QWidget | None = None) -> QLabel:
    label = QLabel(text, parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class HostKeyDialog(QDialog):
    """'The authenticity of host … can't be established' with the fingerprint, as a question."""

    def __init__(
        self, host: str, port: int, fingerprint: str, key_type: str = "", parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.choice = HostKeyChoice.CANCEL
        self.setWindowTitle("Unknown host key")
        self.setMinimumWidth(520)
        where = host if port == 22 else f"[{host}]:{port}"
        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        layout.addWidget(heading(f"First connection to {where}", 1.15, self))
        intro = QLabel(
            "gpuws has never seen this host's key, so it cannot yet tell this host from an impostor. "
            "Compare the fingerprint with the one your provider shows (or that ssh-keygen -lf prints on "
            "the host) before you trust it."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        layout.addWidget(muted_label(f"{key_type or 'Host'} key fingerprint", self))
        self.fingerprint_label = _mono(fingerprint, self)
        big = QFont(self.fingerprint_label.font())
        big.setPointSizeF(big.pointSizeF() * 1.1)
        self.fingerprint_label.setFont(big)
        layout.addWidget(self.fingerprint_label)

        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.cancel_button = QPushButton("Cancel")
        self.once_button = QPushButton("Trust once")
        self.remember_button = QPushButton("Trust and remember")
        self.cancel_button.setDefault(True)  # Enter must never trust a key by accident
        for button, choice in (
            (self.cancel_button, HostKeyChoice.CANCEL),
            (self.once_button, HostKeyChoice.ACCEPT_ONCE),
            (self.remember_button, HostKeyChoice.ACCEPT_AND_REMEMBER),
        ):
            button.clicked.connect(lambda _=False, c=choice: self._choose(c))
            buttons.addWidget(button)
        layout.addLayout(buttons)

    @classmethod
    def for_error(cls, error: BaseException, parent: QWidget | None = None) -> HostKeyDialog:
        """Build the dialog from an `UnknownHostKey` error."""
        port_text = _first(error, "port") or "22"
        return cls(
            _first(error, "host", "hostname"),
            int(port_text) if port_text.isdigit() else 22,
            _first(error, "fingerprint", "new_fingerprint") or "(fingerprint not available)",
            _first(error, "key_type", "algorithm"),
            parent,
        )

    def _choose(self, choice: HostKeyChoice) -> None:
        self.choice = choice
        if choice is HostKeyChoice.CANCEL:
            self.reject()
        else:
            self.accept()


class HostKeyChangedPanel(Banner):
    """The changed-key refusal: explicit, red, naming both fingerprints and the line to fix."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(BannerKind.ERROR, "", parent)

    def show_error(self, error: BaseException) -> None:
        host = _first(error, "host", "hostname") or "this host"
        old = _first(error, "old_fingerprint", "known_fingerprint") or "(unknown)"
        new = _first(error, "new_fingerprint", "fingerprint") or "(unknown)"
        # HostKeyChanged.known is the known_hosts entry that disagrees (path:line in .location).
        where = _first(getattr(error, "known", None), "location") or "your known_hosts file"
        self.set_text(
            f"REFUSED: the host key of {host} has CHANGED.\n"
            f"Known key:  {old}\n"
            f"Offered key: {new}\n"
            "Someone may be intercepting the connection, or the instance was re-created. "
            f"If you are sure the new key is right, remove the old entry at {where} and reconnect."
        )
        self.show()
