"""Qt key events to X keysyms for the built-in viewer: text keys send what they produced (AltGr
layouts, composed dead keys), keys without text come from the table, dead keys wait for their text."""

from __future__ import annotations

from PySide6.QtCore import Qt

from gpuws.ui.vnc.keys import COMBOS, keysym_for, text_keysym

M = Qt.KeyboardModifier
K = Qt.Key


def test_text_keys_send_the_keysym_of_their_text() -> None:
    assert keysym_for(K.Key_A, "a", M.NoModifier) == ord("a")
    assert keysym_for(K.Key_A, "A", M.ShiftModifier) == ord("A")
    # German AltGr+Q is '@'; Windows reports AltGr as Ctrl+Alt.
    assert keysym_for(K.Key_Q, "@", M.ControlModifier | M.AltModifier) == ord("@")
    assert keysym_for(K.Key_E, "€", M.GroupSwitchModifier) == 0x010020AC  # a Unicode keysym
    assert text_keysym("é") == 0xE9  # Latin-1 is its own keysym


def test_control_shortcuts_send_the_keys_own_symbol() -> None:
    assert keysym_for(K.Key_C, "\x03", M.ControlModifier) == ord("c")
    assert keysym_for(K.Key_F, "f", M.AltModifier) == ord("f")


def test_keys_without_text_and_dead_keys() -> None:
    assert keysym_for(K.Key_Return, "\r", M.NoModifier) == 0xFF0D
    assert keysym_for(K.Key_F5, "", M.NoModifier) == 0xFFC2
    assert keysym_for(K.Key_AltGr, "", M.NoModifier) == 0xFE03
    assert keysym_for(K.Key_Dead_Acute, "", M.NoModifier) is None  # the composed 'é' comes next, as text
    assert COMBOS["Ctrl+Alt+Del"] == (0xFFE3, 0xFFE9, 0xFFFF)
