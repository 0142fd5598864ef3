"""gpuws' own directories are platformdirs' (#35: paths.py no longer imports platformdirs to find them on Linux)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import platformdirs
import pytest

from gpuws.core import paths

HOME_VALUES = ["/home/ada", "/home/ada/", "/", "//net/ada", "relative/home", "", None]
XDG_VALUES = ["/xdg/here", "/xdg/trailing/", "relative/xdg", " /leading-space", "", None]


def _platformdirs(kind: Literal["config", "data"]) -> Path:
    return Path(platformdirs.user_config_dir("gpuws") if kind == "config" else platformdirs.user_data_dir("gpuws"))


@pytest.mark.parametrize("kind", ["config", "data"])
@pytest.mark.parametrize("home", HOME_VALUES)
@pytest.mark.parametrize("xdg", XDG_VALUES)
def test_the_directories_are_platformdirs_own(kind: Literal["config", "data"], home: str | None, xdg: str | None,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    variable = "XDG_CONFIG_HOME" if kind == "config" else "XDG_DATA_HOME"
    for name, value in (("HOME", home), (variable, xdg)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert paths.user_dir(kind) == _platformdirs(kind)


def test_the_override_wins_over_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUWS_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert paths.config_dir() == tmp_path / "cfg" and paths.data_dir() == tmp_path / "cfg" / "data"
    assert not (tmp_path / "xdg").exists()
