"""A MIG device's telemetry card: it names its profile, and leaves card-wide power/temperature
to the parent GPU's card."""

from __future__ import annotations

from typing import Any

import pytest

from gpuws.core.telemetry.sample import GpuSample, MigRef
from gpuws.ui.telemetry.gpu_card import GpuCard, device_title, mig_device_name

pytestmark = pytest.mark.gui


def test_mig_card_names_its_profile_and_leaves_power_and_temperature_to_the_parent(qtbot: Any) -> None:
    assert device_title("0/mig1", mig_device_name("1g.10gb", 3)) == "GPU 0 · MIG 1g.10gb · GI 3"
    assert device_title("0/mig1", mig_device_name(None, 3)) == "GPU 0 · MIG 1"  # profile unknown
    assert device_title("0", "NVIDIA H100 80GB HBM3") == "GPU 0 · NVIDIA H100 80GB HBM3"
    card = GpuCard("0/mig1", mig_device_name("1g.10gb", 3))
    qtbot.addWidget(card)
    assert card.title.text() == "GPU 0 · MIG 1g.10gb · GI 3"
    # Some sources copy the parent's power and temperature onto each MIG device: not shown here.
    sample = GpuSample(t=1.0, gpu=0, mem_used_mib=4_000.0, mem_total_mib=9_856.0, temp_c=51.0, power_w=312.0,
                       power_limit_w=700.0, mig=MigRef(0, 1, 3, 0))
    card.update_view(sample, None, 0.0, 2.0)
    assert card.rows["temp_c"].value_text == card.rows["power_w"].value_text == "on GPU 0"
    assert not card.rows["temp_c"].supported and not card.rows["power_w"].supported
    assert card.rows["mem_used_mib"].value_text == "3.9 / 9.6 GiB"  # per-slice memory stays per slice
    parent = GpuCard("0", "NVIDIA H100 80GB HBM3")
    qtbot.addWidget(parent)
    parent.update_view(GpuSample(t=1.0, gpu=0, temp_c=51.0, power_w=312.0, power_limit_w=700.0), None, 0.0, 2.0)
    assert "312" in parent.rows["power_w"].value_text and parent.rows["power_w"].supported


def test_mig_card_shows_the_slice_activity_or_not_supported(qtbot: Any) -> None:
    card = GpuCard("0/mig1", mig_device_name("3g.40gb", 2))
    qtbot.addWidget(card)
    assert card.rows["util_gpu_pct"].label == "Activity"
    busy = GpuSample(t=1.0, gpu=0, util_gpu_pct=78.0, sm_active_pct=70.2, mem_used_mib=4096.0,
                     mem_total_mib=40448.0, mig=MigRef(0, 1, 2, 0))
    card.update_view(busy, None, 0.0, 2.0)
    assert card.rows["util_gpu_pct"].value_text == "78 % · SM 70 %" and card.rows["util_gpu_pct"].supported
    assert card.rows["mem_used_mib"].value_text == "4.0 / 39.5 GiB"
    # A card without GPM (A100) or an agent that does not send it: "not supported", not 0 %.
    unknown = GpuSample(t=2.0, gpu=0, mem_used_mib=4096.0, mem_total_mib=40448.0, mig=MigRef(0, 1, 2, 0))
    card.update_view(unknown, None, 0.0, 2.0)
    assert card.rows["util_gpu_pct"].value_text == "not supported" and not card.rows["util_gpu_pct"].supported
    parent = GpuCard("0", "NVIDIA H100 80GB HBM3")
    qtbot.addWidget(parent)
    assert parent.rows["util_gpu_pct"].label == "GPU util"
