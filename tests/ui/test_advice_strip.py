"""The Advice strip on the host view, against the simulated GPU host (its nvidia-smi first on PATH,
run through a LocalRunner behind a real HostSession; telemetry streams through the app's hub):
the idle A100 is told to stop, with the money, and "Resize to …" opens the Resize wizard on it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuws.core.advice import Advice, AdvicePolicy, Confidence, GpuAdvice
from gpuws.core.models import HostProfile
from gpuws.core.runner import LocalRunner
from gpuws.sim.state import SimStateStore
from gpuws.ui.bridge import AsyncBridge
from gpuws.ui.host_detail import HostDetail
from gpuws.ui.session_controller import HostSession
from gpuws.ui.tabs import HostContext
from gpuws.ui.tabs.resize import ResizeTab
from gpuws.ui.telemetry.advice_strip import AdviceStrip
from gpuws.ui.telemetry.hub import TelemetryHub
from tests.support.local_connection import LocalConnection
from tests.support.sshd import install_sim_nvidia_smi

pytestmark = pytest.mark.gui

A100, L40S = 1, 2  # GPUs of the default simulated host: the idle notebook and the sustained render


@pytest.fixture
def detail(qtbot: Any, bridge: AsyncBridge, tmp_path: Path) -> Iterator[HostDetail]:
    bin_dir = tmp_path / "bin"
    install_sim_nvidia_smi(bin_dir)
    sim_store = SimStateStore(tmp_path / "state")
    sim_store.load()  # the default demo host: H100, A100, L40S, vGPU with their demo loads
    runner = LocalRunner(dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", GPUWS_SIM_STATE=str(sim_store.dir)))
    # The demo profile's prices (gpuws.sim.server.DEMO_SLICE_PRICES).
    profile = HostProfile(name="gpu-lab", host="127.0.0.1", user="me", simulated=True, price_per_hour=9.80,
                          slice_prices={"full": 2.45, "1g.10gb": 0.30, "3g.40gb": 0.95})
    session = HostSession(profile, bridge, connection_factory=lambda _p, **_kw: LocalConnection(runner))
    widget = HostDetail()
    qtbot.addWidget(widget)
    widget.resize(1200, 900)
    strip = widget.advice_strip
    # Explicit settings, not hooks: advise after 3 s of telemetry (default 30 s), look every 0.5 s.
    strip.policy = AdvicePolicy(min_data_s=3)
    strip.timer.setInterval(500)
    session.connect_host()
    qtbot.waitUntil(lambda: session.state == "connected", timeout=15000)
    hub = TelemetryHub(bridge)  # the window's telemetry (over its Workspace), as the window passes it
    widget.set_host(HostContext(profile, session, bridge, hub=hub))
    widget.show()
    yield widget
    widget.set_host(None)
    hub.shutdown()  # the host's telemetry stream
    qtbot.waitUntil(lambda: bridge.pending_count == 0, timeout=15000)
    # The cancelled stream kills its local nvidia-smi and reaps it on the loop: let it finish
    # before the loop stops, or the process outlives the test.
    qtbot.waitUntil(lambda: not _children(), timeout=15000)


def _children() -> list[int]:
    """Pids of this process's children (the local stream's nvidia-smi while it runs)."""
    me, out = os.getpid(), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            out.append(int(stat.parent.name))
    return out


def test_idle_gpu_advice_with_money_opens_the_resize_wizard(detail: HostDetail, qtbot: Any, tmp_path: Path) -> None:
    strip = detail.advice_strip
    qtbot.waitUntil(lambda: A100 in strip.rows and any(a.gpu == L40S and a.advice is not Advice.NOT_ENOUGH_DATA
                                                        for a in strip.advices), timeout=60000)
    row = strip.rows[A100]
    assert row.advice.advice is Advice.STOP and row.advice.price_delta_per_hour == -2.45
    assert row.label.text().startswith("GPU 1: stop it (idle) (-$2.45/h, -$1,788.50/month)")
    assert "idle 100 %" in row.label.toolTip()
    saturated = next(a for a in strip.advices if a.gpu == L40S)
    assert saturated.advice in (Advice.KEEP, Advice.LARGER)  # already the full card: kept, saying so
    assert "GPU 2 (full)" in strip.summary.text()
    assert row.resize_button.isVisible() and row.resize_button.text() == "Resize to 1g.10gb instead…"
    detail.grab().save(str(tmp_path / "advice-strip.png"))  # for a person to look at (pytest keeps the last runs)

    row.resize_button.click()
    tab = detail.tabs.currentWidget()
    assert isinstance(tab, ResizeTab)
    qtbot.waitUntil(lambda: tab.preview is not None, timeout=30000)
    assert tab.preview is not None
    assert tab.picker.current_gpu() == A100 and tab.preview.plan.after.describe() == "1g.10gb"


def _advice(gpu: int, advice: Advice, target: str | None, delta: float) -> GpuAdvice:
    return GpuAdvice(gpu, "full", advice, target, delta, Confidence.LOW, ("utilisation p50 5 %",))


def test_dismissed_advice_comes_back_only_when_it_changes(qtbot: Any) -> None:
    strip = AdviceStrip()
    qtbot.addWidget(strip)
    smaller = _advice(0, Advice.SMALLER, "2g.20gb", -1.83)
    strip.show()
    strip.show_advices([smaller, _advice(1, Advice.KEEP, None, 0.0)])
    assert set(strip.rows) == {0} and strip.isVisible()
    assert strip.rows[0].resize_button.isVisible()  # at once, not after the next event
    assert strip.rows[0].label.text() == "GPU 0: smaller to 2g.20gb (-$1.83/h, -$1,335.90/month)  ·  low confidence"
    assert strip.summary.text() == "Keep: GPU 1 (full)"
    with qtbot.waitSignal(strip.resize_requested) as signal:
        strip.rows[0].resize_button.click()
    assert signal.args == [0, "2g.20gb"]

    strip.rows[0].dismiss_button.click()
    assert strip.rows == {}
    strip.show_advices([smaller])  # the same advice again: stays dismissed
    assert strip.rows == {}
    strip.show_advices([_advice(0, Advice.SMALLER, "3g.40gb", -1.50)])  # changed: back
    assert set(strip.rows) == {0} and strip.rows[0].advice.target == "3g.40gb"


def test_the_strip_says_how_much_data_it_has_of_what_advice_needs() -> None:
    """#35: "not enough data yet (N s of M)" wherever advice is not given yet, the strip too; its
    default minimum is a history's (ten minutes), as the fleet view's."""
    from gpuws.core.advice import HISTORY_MIN_DATA_S, UsageStats
    from gpuws.ui.telemetry.advice_strip import summary_text

    stats = UsageStats(samples=33, span_s=33.0, gap_fraction=0.0, peak_mem_mib=None, p95_mem_mib=None,
                       mem_total_mib=None, p50_util_pct=None, p95_util_pct=None, idle_fraction=None,
                       throttled_busy_fraction=None)
    waiting = GpuAdvice(1, "full", Advice.NOT_ENOUGH_DATA, None, None, Confidence.LOW, ("short",), stats,
                        min_data_s=HISTORY_MIN_DATA_S)
    assert summary_text([waiting], AdvicePolicy(min_data_s=HISTORY_MIN_DATA_S)) == (
        "GPU 1: not enough data yet (33 s of 600 s)")
    assert waiting.headline() == "GPU 1: not enough data yet (33 s of 600 s)"
    assert AdviceStrip().policy.min_data_s == HISTORY_MIN_DATA_S
