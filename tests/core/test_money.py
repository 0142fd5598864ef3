"""Money shown as money: the currency per profile, defaulting to the locale's."""

from __future__ import annotations

import pytest

from gpuws.core.errors import ValidationError
from gpuws.core.models import HostProfile
from gpuws.core.money import currency_of, default_currency, is_currency_code, money, rate
from gpuws.core.profiles import ProfileStore
from gpuws.core.validation import validate_profile


def test_amounts_carry_their_currency() -> None:
    assert money(1.184, "USD") == "$1.18" and money(9.8, "EUR") == "€9.80"
    assert money(1200, "CHF") == "1,200.00 CHF" and rate(9.8, "GBP") == "£9.80/h"
    assert money(-2, "USD") == "-$2.00"


def test_the_default_comes_from_the_locale_and_is_a_code() -> None:
    assert is_currency_code(default_currency())
    assert currency_of(None) == default_currency() and currency_of("JPY") == "JPY"


def test_a_profile_keeps_its_currency_and_budgets(tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    store = ProfileStore(tmp_path / "hosts.toml")
    store.add(HostProfile(name="eu", host="10.0.0.1", currency="eur", budget=500.0, budget_daily=40.0,
                          budget_stop=True))
    loaded = store.get("eu")
    assert (loaded.currency, loaded.budget, loaded.budget_daily, loaded.budget_stop) == ("EUR", 500.0, 40.0, True)
    with pytest.raises(ValidationError) as info:
        validate_profile(HostProfile(name="x", host="h", currency="euros"))
    assert info.value.field == "currency"
