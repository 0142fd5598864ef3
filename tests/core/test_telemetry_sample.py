"""Telemetry sample model: throttle decoding, agent records, and real `--query-gpu` captures."""

from __future__ import annotations

import json

import pynvml
import pytest

from gpuws.core.errors import ParseError
from gpuws.core.nvsmi.query_csv import parse_query_csv
from gpuws.core.telemetry.sample import GpuSample, iso8601, sample_from_agent
from gpuws.core.telemetry.smi_query import invalid_field_in, number, sample_from_query_row
from gpuws.core.telemetry.throttle import REASON_BITS, decode_mask, decode_text_fields, parse_mask
from tests.support.real_fixtures import REAL_FIXTURES

CAPTURES = REAL_FIXTURES / "nvidia-smi-captures"


def capture_query_rows(name: str) -> dict[str, dict[str, str | None]]:
    """{"idle": row, "load": row} from a capture's `--query-gpu ... --format=csv` sections."""
    lines = (CAPTURES / name).read_text().splitlines()
    rows = {}
    for i, line in enumerate(lines):
        if line.startswith("# $ nvidia-smi --query-gpu="):
            phase = lines[i - 1].split("#", 1)[1].split("::")[0].strip()
            (row,) = parse_query_csv("\n".join(lines[i + 2 : i + 4]))
            rows[phase] = row
    assert set(rows) == {"idle", "load"}, f"{name}: query-gpu sections not found"
    return rows


def test_reason_bits_match_nvidia_ml_py() -> None:
    for bit, name in REASON_BITS:
        camel = "".join(part.capitalize() for part in name.split("_"))
        attr = next(
            a for a in dir(pynvml)
            if a.lower() in {f"nvmlclockseventreason{camel}".lower(), f"nvmlclocksthrottlereason{camel}".lower()}
        )
        assert getattr(pynvml, attr) == bit, attr
    assert pynvml.nvmlClocksEventReasonGpuIdle == 0x1


def test_decode_mask_keeps_idle_apart() -> None:
    idle = decode_mask(pynvml.nvmlClocksEventReasonGpuIdle)
    assert idle.reasons == () and idle.idle is True
    hot = decode_mask(pynvml.nvmlClocksEventReasonSwPowerCap | pynvml.nvmlClocksEventReasonHwThermalSlowdown | 0x1)
    assert hot.reasons == ("sw_power_cap", "hw_thermal_slowdown") and hot.idle is True
    assert decode_mask(0x1 << 20).unknown_bits == 0x1 << 20
    assert parse_mask("0x0000000000000041") == 0x41
    assert parse_mask("garbage") is None


def test_text_fields_decode_like_the_mask() -> None:
    row = {
        "clocks_event_reasons.gpu_idle": "Not Active",
        "clocks_event_reasons.sw_thermal_slowdown": "Active",
        "clocks_throttle_reasons.sw_power_cap": "Active",
        "clocks_event_reasons.active": "0x24",
    }
    decoded = decode_text_fields(row)
    assert decoded is not None and decoded.reasons == ("sw_power_cap", "sw_thermal_slowdown")
    assert decoded.idle is False
    assert decode_text_fields({"memory.used": "1"}) is None


@pytest.mark.parametrize("capture", ["h100-80gb-hbm3__590.48.01.txt", "h100-mig__590.48.01.txt"])
def test_real_capture_rows_become_samples(capture: str) -> None:
    rows = capture_query_rows(capture)
    idle = sample_from_query_row(rows["idle"], t=1.0)
    load = sample_from_query_row(rows["load"], t=2.0)
    assert idle is not None and load is not None
    for s in (idle, load):
        assert s.source == "nvidia-smi" and s.gpu == 0 and s.uuid == "GPU-00000000-0000-0000-0000-000000000000"
        assert s.mem_total_mib == 81559 and s.power_limit_w == 700.0
        assert s.sm_clock_max_mhz == 1980 and s.mem_clock_max_mhz == 2619
        assert (s.pcie_gen_current, s.pcie_gen_max, s.pcie_width_current, s.pcie_width_max) == (5, 5, 16, 16)
        assert s.fan_pct is None  # [N/A] on this passively cooled card: missing, never 0
        assert s.pcie_rx_kib_s is None and s.processes is None  # nvidia-smi cannot tell
        assert s.pstate == "P0" and s.ecc_errors_corrected == 0 and s.throttle_reasons == []
    assert idle.idle is True and load.idle is False
    assert idle.sm_clock_mhz == 345 and load.sm_clock_mhz == 1980
    if "mig" in capture:
        # Utilisation is not supported with MIG enabled: None, not 0.
        assert idle.util_gpu_pct is None and load.util_gpu_pct is None and load.enc_util_pct is None
        assert (idle.mem_used_mib, load.mem_used_mib) == (59, 11125)
        assert (idle.power_w, load.power_w, load.temp_c) == (71.15, 433.78, 53)
    else:
        assert (idle.util_gpu_pct, load.util_gpu_pct, load.util_mem_pct) == (0, 100, 11)
        assert (idle.mem_used_mib, load.mem_used_mib) == (0, 19818)
        assert (idle.power_w, load.power_w, idle.temp_c, load.temp_c) == (69.85, 631.95, 41, 59)


def test_number_handles_units_placeholders_and_junk() -> None:
    assert number("81559 MiB") == 81559 and number("69.85") == 69.85
    for missing in (None, "", "[N/A]", "N/A", "[Not Supported]", "[Requested functionality has been deprecated]"):
        assert number(missing) is None
    assert number("rm -rf /") is None
    assert invalid_field_in('Field "pcie.link.gen.gpucurrent" is not a valid field to query.') == (
        "pcie.link.gen.gpucurrent"
    )


def test_agent_record_round_trip_and_missing_values() -> None:
    record = {
        "gpu": 1, "uuid": "GPU-1", "util_gpu_pct": 97, "mem_used_mib": 1024.5, "mem_total_mib": 81559,
        "temp_c": 70, "power_w": 650.5, "fan_pct": None, "throttle_mask": 0x4 | 0x1, "pcie_gen_current": 4,
        "processes": [{"pid": 42, "name": "python", "used_mib": 1000.0}],
        "mig": {"parent_gpu": 1, "device": 2, "gi": 5, "ci": 0},
    }
    s = sample_from_agent(record, t=1_700_000_000.25, simulated=True)
    assert s.key == "1/mig2" and s.throttle_reasons == ["sw_power_cap"] and s.idle is True
    out = json.loads(json.dumps(s.to_dict()))
    assert out["t"] == "2023-11-14T22:13:20.250Z" and out["fan_pct"] is None and out["util_mem_pct"] is None
    # The contract's keys, unchanged; later keys (user, command, sm_util_pct) are additions.
    assert [{k: p[k] for k in ("pid", "name", "used_mib")} for p in out["processes"]] == [
        {"pid": 42, "name": "python", "used_mib": 1000.0}
    ]
    assert out["processes"][0]["user"] is None and out["processes"][0]["sm_util_pct"] is None
    assert out["simulated"] is True and out["source"] == "nvml" and out["gpu"] == 1
    assert out["mig"] == {"parent_gpu": 1, "device": 2, "gi": 5, "ci": 0}


@pytest.mark.parametrize(
    "record",
    [[1, 2], {"gpu": -1}, {"gpu": "0"}, {"gpu": 0, "temp_c": "hot"}, {"gpu": 0, "processes": "x"},
     {"gpu": 0, "mig": {"device": 1}}, {"gpu": 0, "processes": [{"name": "no pid"}]}],
)
def test_malformed_agent_records_are_parse_errors(record: object) -> None:
    with pytest.raises(ParseError):
        sample_from_agent(record, t=0.0)


def test_iso8601_and_mem_pct() -> None:
    assert iso8601(0.0) == "1970-01-01T00:00:00.000Z"
    assert GpuSample(t=0, gpu=0, mem_used_mib=45, mem_total_mib=90).mem_used_pct == 50
    assert GpuSample(t=0, gpu=0, mem_used_mib=45).mem_used_pct is None
