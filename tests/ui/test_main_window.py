"""The main window: empty state, adding and removing hosts, states, persistence, shortcuts."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from PySide6.QtCore import QSize
from PySide6.QtWidgets import QApplication, QMessageBox

from gpuws.core.models import HostProfile
from gpuws.core.profiles import ProfileStore

pytestmark = pytest.mark.gui


def _closed_port() -> int:
    """A loopback port nobody listens on (connects are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_empty_state_offers_the_three_ways_in(make_window: Any) -> None:
    window = make_window()
    assert window.stack.currentWidget() is window.empty
    texts = [b.text() for b in (window.empty.add_button, window.empty.import_button, window.empty.demo_button)]
    assert texts == ["Add host…", "Import from ~/.ssh/config…", "Open demo"]
    assert not window.reconnect_action.isEnabled() and not window.remove_action.isEnabled()


def test_shortcuts(make_window: Any) -> None:
    window = make_window()
    shortcuts = {
        window.add_action: "Ctrl+N",
        window.import_action: "Ctrl+I",
        window.reconnect_action: "Ctrl+R",
        window.settings_action: "Ctrl+,",
        window.quit_action: "Ctrl+Q",
        window.remove_action: "Del",
    }
    for action, keys in shortcuts.items():
        assert action.shortcut().toString() == keys, action.text()
    assert [a.shortcut().toString() for a in window.tab_actions] == [f"Ctrl+{i}" for i in range(1, 7)]
    titles = [window.detail.tabs.tabText(i) for i in range(6)]
    assert titles == ["Overview", "Telemetry", "Benchmarks", "Resize", "Session", "Health"]


def test_add_host_through_the_dialog_saves_the_profile(make_window: Any, qtbot: Any) -> None:
    window = make_window()
    dialog = window.open_add_dialog()
    dialog.name_edit.setText("gpu-a")
    dialog.host_edit.setText("gpu-a.example.com")
    dialog.price_edit.setText("3.10")
    with qtbot.waitSignal(window.profile_saved, timeout=5000) as saved:
        dialog.buttons.accepted.emit()
    assert saved.args == ["gpu-a"]
    assert [p.name for p in ProfileStore().load()] == ["gpu-a"]
    qtbot.waitUntil(lambda: window.sidebar.current_name() == "gpu-a", timeout=5000)
    assert window.stack.currentWidget() is window.detail
    assert window.detail.title.text() == "gpu-a"
    assert window.sidebar.entry("gpu-a").price == "$3.10/h"


def test_unreachable_host_shows_as_a_state_not_an_error_box(make_window: Any, qtbot: Any) -> None:
    """Found (#23): the reason was the error's text; now it is in words, the class only in details."""
    port = _closed_port()
    ProfileStore().add(HostProfile(name="down", host="127.0.0.1", port=port, user="nobody"))
    window = make_window()
    window.reconnect_current()
    qtbot.waitUntil(lambda: window.sidebar.entry("down").state == "unreachable", timeout=10000)
    assert window.detail.status.state == "unreachable"
    assert window.detail.problem.isVisibleTo(window)
    assert "127.0.0.1" in window.detail.address.text()
    problem = window.detail.problem.text()
    assert problem.startswith(f"connection refused on port {port}") and "HostUnreachable" not in problem
    assert window.detail.status.toolTip().startswith("HostUnreachable: ")  # the class, in the details only
    assert window.detail.retry_button.isVisibleTo(window)  # it keeps trying; Retry now tries at once
    assert not [w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()]


def test_window_state_persists(make_window: Any, qtbot: Any) -> None:
    ProfileStore().add(HostProfile(name="a", host="a.example.com"))
    ProfileStore().add(HostProfile(name="b", host="b.example.com"))
    first = make_window()
    first.resize(720, 520)
    first.sidebar.select("b")
    first.show_tab(2)
    first.close()
    second = make_window()
    assert second.size() == QSize(720, 520)
    assert second.detail.tabs.currentIndex() == 2
    assert second.sidebar.current_name() == "b"


def test_remove_asks_first(make_window: Any, qtbot: Any) -> None:
    ProfileStore().add(HostProfile(name="gone", host="gone.example.com"))
    window = make_window()
    window.remove_current()
    boxes = [w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible()]
    assert len(boxes) == 1 and "gone" in boxes[0].text()
    remove = next(b for b in boxes[0].buttons() if b.text() == "Remove")
    with qtbot.waitSignal(window.profiles_loaded, timeout=5000):
        remove.click()
    assert ProfileStore().load() == []
    assert window.stack.currentWidget() is window.empty


def test_corrupt_profile_file_is_reported_and_left_in_place(make_window: Any) -> None:
    store = ProfileStore()
    store.path.write_text("this is [[[ not toml")
    window = make_window()
    assert window.file_problems.isVisibleTo(window)
    assert f"{store.path}:1:" in window.file_problems.banner.text()
    assert "read-only" in window.file_problems.banner.text()
    assert store.path.read_text() == "this is [[[ not toml"


def test_quit_closes_every_window_and_ends_the_process(make_window: Any, qtbot: Any) -> None:
    """Found: Quit (Ctrl+Q) with the Files window open closed only the main window."""
    from PySide6.QtWidgets import QWidget

    window = make_window()
    window.end_process = False
    window.show()
    files = QWidget()  # a top-level window of the app, as the Files window is
    files.setWindowTitle("Files on rig")
    qtbot.addWidget(files)
    files.show()
    window.quit_action.trigger()
    assert not window.isVisible() and not files.isVisible() and window.quit_requested


def test_the_sidebar_keeps_its_width_across_tabs_and_window_sizes(make_window: Any, qtbot: Any) -> None:
    """Found: the sidebar width jumped between tabs; the window could not go below 1180 px."""
    window = make_window()
    with qtbot.waitSignal(window.demo_ready, timeout=15000):
        window.open_demo()
    qtbot.waitUntil(lambda: window.sidebar.entry("demo").state == "connected", timeout=20000)
    window.resize(1400, 900)
    window.show()
    qtbot.waitExposed(window)
    window.splitter.setSizes([310, 1090])
    qtbot.wait(50)
    widths = set()
    for index in range(window.detail.tabs.count()):
        window.detail.tabs.setCurrentIndex(index)
        qtbot.wait(50)
        widths.add(window.sidebar.width())
    assert widths == {310}
    assert window.minimumSizeHint().width() <= 900 and window.minimumSizeHint().height() <= 600
    window.resize(1100, 700)
    qtbot.waitUntil(lambda: window.width() == 1100, timeout=3000)
    assert window.sidebar.width() == 310  # the detail gives way, not the width the user chose
    window.resize(900, 600)
    qtbot.waitUntil(lambda: window.width() == 900, timeout=3000)
    assert 200 <= window.sidebar.width() < 310  # only as much narrower as the tabs need


def test_the_sidebar_and_the_header_show_one_state_in_one_colour(make_window: Any, qtbot: Any) -> None:
    """#35: while frozen the sidebar dot was green beside "Stale (no data for 31 s)" and the header's
    amber. The demo host is made stale by the Workspace's clock (a minute on, no sample since)."""
    import time

    from gpuws.ui import theme

    window = make_window()
    with qtbot.waitSignal(window.demo_ready, timeout=15000):
        window.open_demo()
    qtbot.waitUntil(lambda: window.sidebar.entry("demo").state == "connected"
                    and window.workspace.telemetry.store.status("demo").last_t is not None, timeout=30000)
    window.sidebar.select("demo")
    assert window.workspace.check_stale(time.time() + 60) == ["demo"]  # what the window's clock does, later
    entry = window.sidebar.entry("demo")
    header = window.detail.status
    assert entry is not None and entry.status.startswith("Stale (no data for ")
    assert header.label.text() == entry.status  # the same words ...
    dot = entry.look or entry.state
    assert theme.state_colour(dot) == theme.state_colour(header.state)  # ... in the same colour
    assert dot != "connected"  # never green beside "Stale"
