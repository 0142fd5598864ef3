"""Alerts and advice follow inventory changes at once (#23). Qt-free.

Found: after a MIG resize removed a device, its "Idle GPU" alert stayed active for minutes (the
alert engine had no path for a device that is gone); the advice strip kept the old price for
about 5 minutes after the resize.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any

from gpuws.app.workspace import Change, Workspace, device_keys
from gpuws.core.inventory import GpuInfo, HostFacts, Inventory, MigDevice
from gpuws.core.models import HostProfile
from gpuws.core.telemetry.alerts import AlertKind
from gpuws.core.telemetry.sample import GpuSample, SampleBatch


def run_now(coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
    """A spawn that runs the work to its end at once (these coroutines never wait)."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    future.set_result(asyncio.run(coro))
    return future


def _gpu(index: int, migs: int = 0) -> GpuInfo:
    devices = [MigDevice(i, i, 0, "3g.40gb", 40448) for i in range(migs)]
    return GpuInfo(index, "NVIDIA A100", f"GPU-{index}", None, 81920, "550", "12.4", mig_mode="Enabled" if migs
                   else None, mig_devices=devices)


def test_a_device_a_resize_removed_clears_its_alerts_at_once() -> None:
    ws = Workspace(run_now)
    ws.add_host(HostProfile(name="lab", host="h"))
    before = Inventory(HostFacts(), [_gpu(0), _gpu(1, migs=2)])
    assert device_keys(before) == {"0", "1", "1/mig0", "1/mig1"}
    ws.inventory_changed("lab", before)
    full = dict(mem_used_mib=81000.0, mem_total_mib=81920.0)  # an out-of-memory risk on each device
    batch = SampleBatch(100.0, [GpuSample(t=100.0, gpu=0, **full), GpuSample(t=100.0, gpu=1, **full)], "nvml")
    ws.telemetry.store.ingest("lab", batch)
    ws.telemetry.alerts.evaluate("lab", batch.samples)
    assert {a.gpu for a in ws.telemetry.alert_log.active() if a.kind is AlertKind.OOM_RISK} == {"0", "1"}

    ws.inventory_changed("lab", Inventory(HostFacts(), [_gpu(0)]))  # GPU 1 is gone
    assert {a.gpu for a in ws.telemetry.alert_log.active()} == {"0"}  # in the same call: nothing waits
    assert "1" not in ws.telemetry.store.device_keys("lab")
    ws.close(timeout=5)


def test_a_new_price_reaches_every_view_in_the_same_event() -> None:
    ws = Workspace(run_now)
    heard: list[tuple[Change, str]] = []
    ws.subscribe(lambda change, host: heard.append((change, host)))
    profile = HostProfile(name="lab", host="h", price_per_hour=2.45, slice_profile="full")
    ws.add_host(profile)
    cheaper = HostProfile(name="lab", host="h", price_per_hour=2.10, slice_profile="3g.40gb")
    ws.price_changed(cheaper)
    assert heard[-1] == (Change.PRICE, "lab")
    record = ws.host("lab")
    assert record is not None and record.profile.price_per_hour == 2.10  # what the views read on PRICE
    ws.close(timeout=5)
