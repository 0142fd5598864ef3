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
