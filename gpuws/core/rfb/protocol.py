"""RFB 3.8 messages (RFC 6143 and the community extensions), as bytes: what the client sends, the
constants it reads, and VNC authentication's DES response."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from enum import IntEnum, IntFlag

from gpuws.core.rfb.errors import RfbLimitExceeded, RfbUnsupported

VERSION_38 = b"RFB 003.008\n"
MAX_NAME = 64 * 1024  # a desktop name longer than this is refused
MAX_REASON = 64 * 1024  # a failure reason longer than this is cut


class Security(IntEnum):
    """Security types (RFC 6143 7.1.2)."""

    INVALID = 0
    NONE = 1
    VNC_AUTH = 2


class Encoding(IntEnum):
    """Encodings and pseudo-encodings the client announces (signed 32-bit numbers)."""

    RAW = 0
    COPY_RECT = 1
    TIGHT = 7
    ZRLE = 16
    CURSOR = -239
    DESKTOP_SIZE = -223
    LAST_RECT = -224
    EXTENDED_DESKTOP_SIZE = -308
    FENCE = -312
    CONTINUOUS_UPDATES = -313
    EXTENDED_CLIPBOARD = 0xC0A1E5CE - (1 << 32)  # as the signed 32-bit number SetEncodings carries
    COMPRESS_LEVEL_0 = -256  # .. -247: Tight's zlib level 0..9
    QUALITY_LEVEL_0 = -32  # .. -23: Tight's JPEG quality 0..9


class ServerMessage(IntEnum):
    """Server-to-client message types."""

    FRAMEBUFFER_UPDATE = 0
    SET_COLOUR_MAP_ENTRIES = 1
    BELL = 2
    SERVER_CUT_TEXT = 3
    END_OF_CONTINUOUS_UPDATES = 150
    SERVER_FENCE = 248


class ClientMessage(IntEnum):
    """Client-to-server message types."""

    SET_PIXEL_FORMAT = 0
    SET_ENCODINGS = 2
    FRAMEBUFFER_UPDATE_REQUEST = 3
    KEY_EVENT = 4
    POINTER_EVENT = 5
    CLIENT_CUT_TEXT = 6
    ENABLE_CONTINUOUS_UPDATES = 150
    CLIENT_FENCE = 248
    SET_DESKTOP_SIZE = 251


class FenceFlag(IntFlag):
    """Fence message flags (the community RFB spec's Fence extension)."""

    BLOCK_BEFORE = 1 << 0
    BLOCK_AFTER = 1 << 1
    SYNC_NEXT = 1 << 2
    REQUEST = 1 << 31


class ClipFlag(IntFlag):
    """Extended Clipboard's flags: formats (bits 0-15) and actions (bits 24-31)."""

    TEXT = 1 << 0  # UTF-8, CR LF line ends, a terminating NUL
    RTF = 1 << 1
    HTML = 1 << 2
    DIB = 1 << 3
    FILES = 1 << 4
    CAPS = 1 << 24
    REQUEST = 1 << 25
    PEEK = 1 << 26
    NOTIFY = 1 << 27
    PROVIDE = 1 << 28


CLIP_FORMATS = 0xFFFF
CLIP_ACTIONS = ClipFlag.REQUEST | ClipFlag.PEEK | ClipFlag.NOTIFY | ClipFlag.PROVIDE


FENCE_UNDERSTOOD = FenceFlag.BLOCK_BEFORE | FenceFlag.BLOCK_AFTER | FenceFlag.SYNC_NEXT
MAX_FENCE_PAYLOAD = 64  # the spec's bound on a fence's payload


# The one pixel format the client asks for: 32 bits, depth 24, little-endian, red at bit 16. In memory a
# pixel is B, G, R, X: Qt's QImage.Format_RGB32 on every little-endian machine, so a frame paints as it is.
PIXEL_FORMAT = struct.pack(">BBBBHHHBBB3x", 32, 24, 0, 1, 255, 255, 255, 16, 8, 0)

QUALITY_LEVELS = range(10)  # Tight JPEG quality, 0 (smallest) .. 9 (best)
DEFAULT_QUALITY = 8
COMPRESS_LEVEL = 2  # Tight's zlib level: cheap for the server, good enough on a tunnel


@dataclass(frozen=True)
class ServerInit:
    """The server's ServerInit: framebuffer size and the desktop's name."""

    width: int
    height: int
    name: str


def parse_version(greeting: bytes) -> tuple[int, int]:
    """The server's ProtocolVersion ('RFB 003.008\\n') as (major, minor)."""
    if len(greeting) != 12 or not greeting.startswith(b"RFB ") or greeting[7:8] != b"." or greeting[11:] != b"\n":
        raise RfbUnsupported(f"not a VNC server (it greeted with {greeting[:12]!r})")
    try:
        major, minor = int(greeting[4:7]), int(greeting[8:11])
    except ValueError:
        raise RfbUnsupported(f"not a VNC server (it greeted with {greeting[:12]!r})") from None
    if (major, minor) < (3, 3):
        raise RfbUnsupported(f"the server speaks RFB {major}.{minor}, older than 3.3")
    return major, minor


def vnc_auth_response(password: str, challenge: bytes) -> bytes:
    """VNC authentication: the 16-byte challenge DES-encrypted with the password (its first 8 bytes,
    zero-padded, each byte's bits reversed, as VNC has always done)."""
    from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
    from cryptography.hazmat.primitives.ciphers import Cipher, modes

    if len(challenge) != 16:
        raise ValueError("the VNC challenge is 16 bytes")
    raw = password.encode("latin-1", errors="replace")[:8].ljust(8, b"\0")
    key = bytes(int(f"{b:08b}"[::-1], 2) for b in raw)
    # Single DES is TripleDES with three equal keys (cryptography has no plain DES).
    encryptor = Cipher(TripleDES(key * 3), modes.ECB()).encryptor()  # noqa: S305 (the protocol says so)
    return encryptor.update(challenge) + encryptor.finalize()


def set_pixel_format() -> bytes:
    """SetPixelFormat with `PIXEL_FORMAT`."""
    return struct.pack(">B3x", ClientMessage.SET_PIXEL_FORMAT) + PIXEL_FORMAT


def encodings(quality: int | None = DEFAULT_QUALITY) -> list[int]:
    """The encodings to announce, best first; `quality` None turns JPEG off (lossless Tight).

    As TigerVNC's vncviewer asks (so both get the same bytes from Xvnc): Tight first, its zlib level 2
    and JPEG quality 8, and ContinuousUpdates with Fence, so the server pushes each change as it happens
    instead of waiting for a request a round trip after the last update; Extended Clipboard for text
    in UTF-8 (plain RFB's is Latin-1)."""
    chosen = [Encoding.TIGHT, Encoding.ZRLE, Encoding.COPY_RECT, Encoding.RAW, Encoding.CURSOR,
              Encoding.EXTENDED_DESKTOP_SIZE, Encoding.DESKTOP_SIZE, Encoding.LAST_RECT,
              Encoding.FENCE, Encoding.CONTINUOUS_UPDATES, Encoding.EXTENDED_CLIPBOARD,
              Encoding.COMPRESS_LEVEL_0 + COMPRESS_LEVEL]
    if quality is not None:
        if quality not in QUALITY_LEVELS:
            raise ValueError(f"quality {quality} is not 0..9")
        chosen.append(Encoding.QUALITY_LEVEL_0 + quality)
    return [int(e) for e in chosen]


def set_encodings(numbers: list[int]) -> bytes:
    """SetEncodings."""
    return struct.pack(">BxH", ClientMessage.SET_ENCODINGS, len(numbers)) + struct.pack(f">{len(numbers)}i", *numbers)


def update_request(incremental: bool, x: int, y: int, width: int, height: int) -> bytes:
    """FramebufferUpdateRequest."""
    return struct.pack(">BBHHHH", ClientMessage.FRAMEBUFFER_UPDATE_REQUEST, int(incremental), x, y, width, height)


def enable_continuous_updates(enable: bool, x: int, y: int, width: int, height: int) -> bytes:
    """EnableContinuousUpdates: the server sends updates of that area as they happen (or stops, and
    answers EndOfContinuousUpdates)."""
    return struct.pack(">BBHHHH", ClientMessage.ENABLE_CONTINUOUS_UPDATES, int(enable), x, y, width, height)


def fence(flags: int, payload: bytes) -> bytes:
    """ClientFence (a request, or the answer to the server's: its flags less REQUEST, its payload)."""
    if len(payload) > MAX_FENCE_PAYLOAD:
        raise ValueError(f"a fence carries at most {MAX_FENCE_PAYLOAD} bytes")
    return struct.pack(">B3xIB", ClientMessage.CLIENT_FENCE, flags & 0xFFFFFFFF, len(payload)) + payload


def key_event(keysym: int, down: bool) -> bytes:
    """KeyEvent with an X keysym."""
    return struct.pack(">BBxxI", ClientMessage.KEY_EVENT, int(down), keysym & 0xFFFFFFFF)


def pointer_event(buttons: int, x: int, y: int) -> bytes:
    """PointerEvent: `buttons` is the mask (bit 0 = button 1 ... bit 4 = wheel down)."""
    return struct.pack(">BBHH", ClientMessage.POINTER_EVENT, buttons & 0xFF, max(0, min(x, 0xFFFF)),
                       max(0, min(y, 0xFFFF)))


def client_cut_text(text: str) -> bytes:
    """ClientCutText: RFB 3.8 text is Latin-1 (characters outside it become '?')."""
    data = text.replace("\r\n", "\n").encode("latin-1", errors="replace")
    return struct.pack(">B3xI", ClientMessage.CLIENT_CUT_TEXT, len(data)) + data


def _extended_cut_text(body: bytes) -> bytes:
    """ClientCutText in Extended Clipboard's form: a negative length, then `body` (flags first)."""
    return struct.pack(">B3xi", ClientMessage.CLIENT_CUT_TEXT, -len(body)) + body


def clipboard_caps(max_text: int) -> bytes:
    """Extended Clipboard caps: this client takes text (up to `max_text` bytes unasked) and every action."""
    return _extended_cut_text(struct.pack(">II", ClipFlag.CAPS | ClipFlag.TEXT | CLIP_ACTIONS, max_text))


def clipboard_action(action: ClipFlag, formats: int = ClipFlag.TEXT) -> bytes:
    """An Extended Clipboard action without data: request, peek or notify (`formats` 0: nothing here)."""
    return _extended_cut_text(struct.pack(">I", action | (formats & CLIP_FORMATS)))


def text_for_clipboard(text: str) -> bytes:
    """Text as Extended Clipboard carries it: UTF-8, CR LF line ends, a terminating NUL."""
    return text.replace("\r\n", "\n").replace("\n", "\r\n").encode("utf-8", errors="replace") + b"\0"


def clipboard_provide(text: str) -> bytes:
    """Extended Clipboard provide: the text, in a zlib stream after the flags."""
    data = text_for_clipboard(text)
    return _extended_cut_text(struct.pack(">I", ClipFlag.PROVIDE | ClipFlag.TEXT)
                              + zlib.compress(struct.pack(">I", len(data)) + data))


@dataclass(frozen=True)
class ClipboardMessage:
    """A server's Extended Clipboard message: its flags, the caps' sizes, a provide's text."""

    flags: int
    sizes: tuple[int, ...] = ()
    text: str | None = None

    @property
    def action(self) -> int:
        """The action bits (CAPS, REQUEST, PEEK, NOTIFY or PROVIDE)."""
        return self.flags & (ClipFlag.CAPS | CLIP_ACTIONS)


def parse_clipboard(body: bytes, max_text: int) -> ClipboardMessage:
    """A server's Extended Clipboard message (after its negative length). A provide's text is inflated
    up to `max_text` bytes: longer text (a zlib bomb too) is dropped, never held."""
    if len(body) < 4:
        raise RfbLimitExceeded("Extended Clipboard message", f"{len(body)} bytes, shorter than its flags")
    flags = struct.unpack_from(">I", body)[0]
    formats = [bit for bit in range(16) if flags & (1 << bit)]
    if flags & ClipFlag.CAPS:
        count = min(len(formats), (len(body) - 4) // 4)
        return ClipboardMessage(flags, struct.unpack_from(f">{count}I", body, 4))
    if not flags & ClipFlag.PROVIDE:
        return ClipboardMessage(flags)
    stream = zlib.decompressobj()
    try:
        head = stream.decompress(body[4:], 4)
        text = None
        for bit in formats:
            if len(head) < 4:
                break
            size = struct.unpack(">I", head)[0]
            if size > max_text:
                break  # too long to take: the rest (text comes first) is not read
            data = stream.decompress(stream.unconsumed_tail, size) if size else b""
            if bit == 0:
                text = data.split(b"\0", 1)[0].decode("utf-8", errors="replace").replace("\r\n", "\n")
                break
            head = stream.decompress(stream.unconsumed_tail, 4)
    except zlib.error as exc:
        raise RfbLimitExceeded("Extended Clipboard data", str(exc)) from None
    return ClipboardMessage(flags, text=text)


def set_desktop_size(width: int, height: int, screen_id: int = 0, flags: int = 0) -> bytes:
    """SetDesktopSize with one screen covering the whole framebuffer."""
    return (struct.pack(">BxHHBx", ClientMessage.SET_DESKTOP_SIZE, width, height, 1)
            + struct.pack(">IHHHHI", screen_id, 0, 0, width, height, flags))
