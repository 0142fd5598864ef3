"""Money shown as money: an amount with its currency, never a bare number.

Each profile may name its currency (ISO 4217 code, e.g. "EUR"); without one the user's locale
decides (`default_currency`), and "USD" where the locale says nothing.
"""

from __future__ import annotations

import locale
import re
import threading
from typing import Final

_SYMBOLS: Final = {"USD": "$", "EUR": "€", "GBP": "£", "JPY": "¥", "INR": "₹", "KRW": "₩"}
_CODE = re.compile(r"^[A-Z]{3}$")
_lock = threading.Lock()
_default: str | None = None


def is_currency_code(text: str) -> bool:
    """Three upper-case letters, as ISO 4217 codes are."""
    return bool(_CODE.match(text))


def default_currency() -> str:
    """The user's locale's currency ("EUR" for de_DE), or "USD" where it names none."""
    global _default
    with _lock:
        if _default is None:
            _default = _locale_currency() or "USD"
        return _default


def _locale_currency() -> str | None:
    # localeconv() answers for the process's LC_MONETARY: read the user's, then put it back.
    try:
        before = locale.setlocale(locale.LC_MONETARY)
        try:
            locale.setlocale(locale.LC_MONETARY, "")
            code = str(locale.localeconv().get("int_curr_symbol", "")).strip()
        finally:
            locale.setlocale(locale.LC_MONETARY, before)
    except (locale.Error, ValueError):
        return None
    return code if is_currency_code(code) else None


def currency_of(configured: str | None) -> str:
    """A profile's currency: its own, else the locale's."""
    return configured if configured and is_currency_code(configured) else default_currency()


def money(amount: float, currency: str) -> str:
    """'$1.18', '€9.80', '1,200.00 CHF'."""
    symbol = _SYMBOLS.get(currency)
    sign = "-" if amount < 0 else ""
    if symbol is not None:
        return f"{sign}{symbol}{abs(amount):,.2f}"
    return f"{sign}{abs(amount):,.2f} {currency}"


def rate(price_per_hour: float, currency: str) -> str:
    """'$9.80/h'."""
    return f"{money(price_per_hour, currency)}/h"
