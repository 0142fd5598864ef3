"""The window shows a hand-edited profile file's problems in a banner with "Open file" (#27)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuws.core.profiles import ProfileStore

pytestmark = pytest.mark.gui


def test_a_misspelt_key_shows_in_a_banner_and_the_host_stays(make_window: Any, qtbot: Any) -> None:
    path = ProfileStore().path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('schema_version = 1\n[[hosts]]\nname = "alpha"\nhost = "a.example"\ncurency = "EUR"\n'
                    '[[hosts]]\nname = "beta"\nhost = "b.example"\nport = 70000\n')
    window = make_window()
    qtbot.waitUntil(lambda: window.file_problems.isVisibleTo(window), timeout=5000)
    text = window.file_problems.banner.text()
    assert f"{path}:5: curency:" in text and "did you mean 'currency'" in text
    assert f"{path}:9: port:" in text
    assert window.sidebar.entry("alpha") is not None  # the host is still there
    with qtbot.waitSignal(window.file_problems.open_requested, timeout=2000) as opened:
        window.file_problems.open_button.click()
    assert opened.args == [str(path)]
    # Fixed by hand: the banner goes with the next reload.
    path.write_text('schema_version = 1\n[[hosts]]\nname = "alpha"\nhost = "a.example"\ncurrency = "EUR"\n')
    window.reload_profiles()
    qtbot.waitUntil(lambda: not window.file_problems.isVisibleTo(window), timeout=5000)
