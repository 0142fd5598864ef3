"""GUI test fixtures: a started async bridge, a main window factory, and a leak check.

Every GUI test fails if it leaves a top-level widget alive or an asyncio loop thread running
(as napari's test suite does), so windows and dialogs must be closed and deleted by the end.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QCoreApplication, QEvent
from PySide6.QtWidgets import QApplication

from gpuws.core.inventory import Inventory
from gpuws.ui.bridge import AsyncBridge
from tests.support.real_fixtures import REAL_FIXTURES

FIXTURES = REAL_FIXTURES


def fixture_path(*parts: str) -> Path:
    path = FIXTURES.joinpath(*parts)
    assert path.is_file(), f"missing test fixture {path} (tests/fixtures/real is part of the repository)"
    return path


def fixture_inventory(name: str = "a100-sxm4-v12.xml") -> Inventory:
    """An inventory whose GPUs come from a real nvidia-smi XML capture."""
    from gpuws.core.inventory import HostFacts
    from gpuws.core.nvsmi.xml_inventory import parse_nvidia_smi_xml

    gpus = parse_nvidia_smi_xml(fixture_path("nvidia-smi-xml", name).read_text())
    facts = HostFacts(hostname="gpu-box", os="Ubuntu 22.04.4 LTS", kernel="5.15.0-105-generic", cpu_count=32,
                      ram_mib=257_000, has_python3=True, has_nvml=True, has_torch=True)  # fmt: skip
    return Inventory(facts, gpus)


def _flush_deletes() -> None:
    for collect in (False, True, False):
        QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        QCoreApplication.processEvents()
        if collect:  # Python-owned parentless widgets (pyqtgraph's menus) go when their owner is collected
            gc.collect()


@pytest.fixture(autouse=True)
def no_leaks(qapp: QApplication) -> Iterator[None]:
    """Fail the test if it leaves top-level widgets or gpuws loop threads behind."""
    _flush_deletes()
    before = set(map(id, QApplication.topLevelWidgets()))
    threads_before = {t.ident for t in threading.enumerate()}
    yield
    _flush_deletes()
    leaked = [w for w in QApplication.topLevelWidgets() if id(w) not in before]
    names = [f"{type(w).__name__}({w.objectName() or w.windowTitle()!r})" for w in leaked]
    for widget in leaked:  # clean up so one leak does not cascade into the next test
        widget.close()
        widget.deleteLater()
    _flush_deletes()
    threads = [t.name for t in threading.enumerate() if t.ident not in threads_before and t.name.startswith("gpuws")]
    assert not names, f"test leaked top-level widgets: {names}"
    assert not threads, f"test leaked threads: {threads}"


@pytest.fixture
def bridge(qapp: QApplication) -> Iterator[AsyncBridge]:
    b = AsyncBridge()
    b.start()
    yield b
    b.shutdown()


@pytest.fixture
def make_window(bridge: AsyncBridge, qtbot: Any) -> Iterator[Callable[..., Any]]:
    """Build a MainWindow (not connecting at start unless asked); it is shut down at the end."""
    from gpuws.ui.main_window import MainWindow
    from gpuws.ui.settings import Preferences

    windows: list[MainWindow] = []

    def make(connect_on_start: bool = False, wait_loaded: bool = True, **kwargs: Any) -> MainWindow:
        Preferences(connect_on_start=connect_on_start).save()
        window = MainWindow(bridge, **kwargs)
        windows.append(window)
        if wait_loaded:
            with qtbot.waitSignal(window.profiles_loaded, timeout=5000):
                pass
        return window

    yield make
    for window in windows:
        window.shutdown()
        window.close()
        window.deleteLater()
    _flush_deletes()
