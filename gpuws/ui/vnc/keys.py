"""Qt key events to X keysyms, for RFB's KeyEvent.

Text keys send the keysym of the text they produced (so an AltGr layout's '@' or a dead key's 'é'
arrive as typed, whatever the remote keyboard layout); keys without text come from the table.
"""

from __future__ import annotations

from PySide6.QtCore import Qt

K = Qt.Key

# Keys that produce no text, to X keysyms (X11/keysymdef.h).
SPECIAL: dict[int, int] = {
    K.Key_Escape: 0xFF1B, K.Key_Tab: 0xFF09, K.Key_Backtab: 0xFF09, K.Key_Backspace: 0xFF08,
    K.Key_Return: 0xFF0D, K.Key_Enter: 0xFF0D, K.Key_Insert: 0xFF63, K.Key_Delete: 0xFFFF,
    K.Key_Pause: 0xFF13, K.Key_Print: 0xFF61, K.Key_SysReq: 0xFF15, K.Key_Clear: 0xFF0B,
    K.Key_Home: 0xFF50, K.Key_End: 0xFF57, K.Key_Left: 0xFF51, K.Key_Up: 0xFF52, K.Key_Right: 0xFF53,
    K.Key_Down: 0xFF54, K.Key_PageUp: 0xFF55, K.Key_PageDown: 0xFF56,
    K.Key_Shift: 0xFFE1, K.Key_Control: 0xFFE3, K.Key_Meta: 0xFFE7, K.Key_Alt: 0xFFE9,
    K.Key_AltGr: 0xFE03, K.Key_CapsLock: 0xFFE5, K.Key_NumLock: 0xFF7F, K.Key_ScrollLock: 0xFF14,
    K.Key_Super_L: 0xFFEB, K.Key_Super_R: 0xFFEC, K.Key_Menu: 0xFF67, K.Key_Hyper_L: 0xFFED,
    K.Key_Hyper_R: 0xFFEE, K.Key_Help: 0xFF6A, K.Key_Space: 0x20,
}
SPECIAL.update({int(K.Key_F1) + n: 0xFFBE + n for n in range(35)})  # F1..F35

CONTROL_L, SHIFT_L, ALT_L, SUPER_L, DELETE, ESCAPE, TAB, F4, PRINT = (
    0xFFE3, 0xFFE1, 0xFFE9, 0xFFEB, 0xFFFF, 0xFF1B, 0xFF09, 0xFFC1, 0xFF61)

# The keys the local OS would catch, sent from the viewer's menu: name -> keysyms pressed in order.
COMBOS: dict[str, tuple[int, ...]] = {
    "Ctrl+Alt+Del": (CONTROL_L, ALT_L, DELETE),
    "Ctrl+Esc": (CONTROL_L, ESCAPE),
    "Alt+Tab": (ALT_L, TAB),
    "Alt+F4": (ALT_L, F4),
    "Super (Windows key)": (SUPER_L,),
    "Print Screen": (PRINT,),
    **{f"Ctrl+Alt+F{n}": (CONTROL_L, ALT_L, 0xFFBE + n - 1) for n in (1, 2, 7)},
}


def text_keysym(char: str) -> int:
    """The keysym of one character: Latin-1 is its own code, the rest Unicode keysyms (0x01000000 + U)."""
    code = ord(char)
    if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF:
        return code
    return 0x01000000 | code


def keysym_for(key: int, text: str, modifiers: Qt.KeyboardModifier) -> int | None:
    """The keysym a key event sends, or None (a dead key: the text it composes comes with the next key).

    Printable text wins (AltGr layouts; Windows reports AltGr as Ctrl+Alt), except with Ctrl alone or Alt
    alone held, where the text is a control character or a shortcut: then the key's own symbol.
    """
    if key in SPECIAL:
        return SPECIAL[key]
    if int(K.Key_Dead_Grave) <= key <= int(K.Key_Dead_Longsolidusoverlay):
        return None
    ctrl = bool(modifiers & Qt.KeyboardModifier.ControlModifier)
    alt = bool(modifiers & Qt.KeyboardModifier.AltModifier)
    if len(text) == 1 and text.isprintable() and ctrl == alt:
        return text_keysym(text)
    if 0x20 <= key <= 0xFF:  # Qt's Latin-1 keys are their upper-case characters
        return ord(chr(key).lower()) if not modifiers & Qt.KeyboardModifier.ShiftModifier else key
    if len(text) == 1 and text.isprintable():
        return text_keysym(text)
    return None
