"""Opening a URL never prints it: a Jupyter URL carries its login token."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from gpuws.ui.external import open_in_browser

URL = "http://127.0.0.1:8888/?token=0123456789abcdef-secret-token"


def test_a_failing_launcher_never_prints_the_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capfd: Any) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    done = tmp_path / "ran"
    launcher = bin_dir / "xdg-open"
    # A launcher that fails noisily, as xdg-open does with no browser: it echoes the URL on stderr.
    launcher.write_text(f'#!/bin/sh\necho "xdg-open: no method available for opening $1" >&2\necho "$1"\n'
                        f'touch {done}\nexit 3\n')
    launcher.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("DISPLAY", ":99")
    assert open_in_browser(URL)
    for _ in range(100):
        if done.exists():
            break
        time.sleep(0.05)
    assert done.exists()
    out, err = capfd.readouterr()
    assert "secret-token" not in out + err


def test_no_display_means_no_browser(monkeypatch: pytest.MonkeyPatch, capfd: Any) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert open_in_browser(URL) is False
    out, err = capfd.readouterr()
    assert "secret-token" not in out + err
