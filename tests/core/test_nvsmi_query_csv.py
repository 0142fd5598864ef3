"""`--query-gpu` CSV parsing against the real H100 captures (idle and under gpu-burn, MIG on and off)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuws.core.errors import ParseError
from gpuws.core.nvsmi import parse_query_csv, parse_query_line, to_float, to_int
from tests.core.nvsmi_fixtures import H100, H100_MIG, capture_section, section_command

# (capture, state) -> values read from that section of the capture.
EXPECTED: dict[tuple[Path, str], dict[str, str | None]] = {
    (H100, "idle"): {
        "memory.used": "0", "memory.free": "81081", "utilization.gpu": "0", "utilization.memory": "0",
        "temperature.gpu": "41", "power.draw": "69.85", "clocks.current.sm": "345", "mig.mode.current": "Disabled",
        "clocks_event_reasons.active": "0x0000000000000001", "timestamp": "2026/07/14 08:12:38.696",
    },
    (H100, "load"): {
        "memory.used": "19818", "memory.free": "61263", "utilization.gpu": "100", "utilization.memory": "11",
        "temperature.gpu": "59", "power.draw": "631.95", "clocks.current.sm": "1980", "mig.mode.current": "Disabled",
        "clocks_event_reasons.active": "0x0000000000000000",
    },
    # With MIG on, whole-GPU utilisation is not reported: [N/A].
    (H100_MIG, "idle"): {
        "memory.used": "59", "utilization.gpu": None, "utilization.memory": None, "temperature.gpu": "42",
        "power.draw": "71.15", "mig.mode.current": "Enabled",
    },
    (H100_MIG, "load"): {
        "memory.used": "11125", "utilization.gpu": None, "temperature.gpu": "53", "power.draw": "433.78",
        "clocks.current.sm": "1980", "mig.mode.current": "Enabled",
    },
}  # fmt: skip

# The same in every section: static facts and the missing markers of this driver.
COMMON: dict[str, str | None] = {
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-00000000-0000-0000-0000-000000000000",
    "pci.bus_id": "00000000:00:09.0",
    "index": "0",
    "memory.total": "81559",
    "power.limit": "700.00",
    "enforced.power.limit": "700.00",
    "clocks.max.sm": "1980",
    "clocks.max.memory": "2619",
    "pcie.link.gen.max": "5",
    "pcie.link.width.max": "16",
    "compute_cap": "9.0",
    "pstate": "P0",
    "ecc.mode.current": "Enabled",
    "fan.speed": None,  # [N/A]
    "display_mode": None,  # [Requested functionality has been deprecated]
    "power.management": None,  # [Requested functionality has been deprecated]
    "clocks.applications.graphics": None,  # [Requested functionality has been deprecated]
    "fabric.health.summary": None,  # N/A without brackets
    "hostname": None,  # [N/A]
    "edpp_multiplier": "100.00",  # "100.00 %"
}


def query_fields(path: Path, state: str) -> list[str]:
    command = section_command(path, f"{state} :: query-gpu")
    match = re.search(r"--query-gpu=(\S+)", command)
    assert match, command
    return match.group(1).split(",")


@pytest.mark.parametrize(("path", "state"), list(EXPECTED), ids=lambda v: getattr(v, "stem", v))
def test_real_query_gpu_with_header_and_units(path: Path, state: str) -> None:
    fields = query_fields(path, state)
    (row,) = parse_query_csv(capture_section(path, f"{state} :: query-gpu"))
    assert list(row) == fields  # keyed by the query names, in order, units gone from the header
    assert len(fields) == 212
    assert {key: row[key] for key in COMMON} == COMMON
    assert {key: row[key] for key in EXPECTED[(path, state)]} == EXPECTED[(path, state)]


@pytest.mark.parametrize(("path", "state"), list(EXPECTED), ids=lambda v: getattr(v, "stem", v))
def test_noheader_and_nounits_forms_give_the_same_rows(path: Path, state: str) -> None:
    fields = query_fields(path, state)
    header, data = capture_section(path, f"{state} :: query-gpu").splitlines()
    with_header = parse_query_csv(f"{header}\n{data}\n")
    # `noheader`: the caller supplies the field list.
    assert parse_query_csv(data + "\n", fields) == with_header
    # A header is recognised and skipped even when the caller passes the fields.
    assert parse_query_csv(f"{header}\n{data}\n", fields) == with_header
    # `nounits`: the same numbers without their units.
    nounits = re.sub(r"(\d) (?:MiB|W|MHz|%|us)(?=,|$)", r"\1", data)
    assert nounits != data
    assert parse_query_csv(nounits, fields) == with_header


def test_streaming_lines_parse_one_at_a_time() -> None:
    fields = query_fields(H100, "load")
    stream = [
        *capture_section(H100, "idle :: query-gpu").splitlines(),
        "",
        capture_section(H100, "load :: query-gpu").splitlines()[1],
    ]
    parsed = [parse_query_line(line, fields) for line in stream]
    assert parsed[0] is None  # header
    assert parsed[2] is None  # blank
    idle, load = parsed[1], parsed[3]
    assert idle is not None and load is not None
    assert (idle["utilization.gpu"], load["utilization.gpu"]) == ("0", "100")
    assert (to_float(idle["power.draw"]), to_float(load["power.draw"])) == (69.85, 631.95)


def test_short_streaming_query_as_the_telemetry_fallback_uses_it() -> None:
    fields = ["index", "uuid", "utilization.gpu", "memory.used", "power.draw", "clocks_event_reasons.active"]
    line = "0, GPU-00000000-0000-0000-0000-000000000000, [N/A], 11125, 433.78, 0x0000000000000000\r\n"
    assert parse_query_line(line, fields) == {
        "index": "0",
        "uuid": "GPU-00000000-0000-0000-0000-000000000000",
        "utilization.gpu": None,
        "memory.used": "11125",
        "power.draw": "433.78",
        "clocks_event_reasons.active": "0x0000000000000000",
    }


def test_retired_pages_rows_keep_their_text() -> None:
    rows = parse_query_csv(capture_section(H100, "idle :: query-retired-pages"))
    assert [(r["retired_pages.cause"], r["retired_pages.address"]) for r in rows] == [
        ("Single Bit ECC", None),
        ("Double Bit ECC", None),
    ]


def test_header_only_output_is_no_rows_and_headers_are_renamed_fields() -> None:
    # nvidia-smi renames some fields in headers (gpu_util -> gpu_utilization [%]).
    assert parse_query_csv(capture_section(H100, "load :: query-accounted-apps")) == []


def test_not_supported_marker_is_none() -> None:
    assert parse_query_line("[Not Supported], 45 %, , N/A", ["a", "b", "c", "d"]) == {
        "a": None,
        "b": "45",
        "c": None,
        "d": None,
    }


@pytest.mark.parametrize(
    ("text", "fields", "message"),
    [
        ("", None, "empty"),
        ("No devices were found\n", None, "expected a header line"),
        ("No devices were found\n", ["index", "uuid"], "has 1 columns, expected 2"),
        ("index, uuid\n0, GPU-1, extra\n", None, "row 1 has 3 columns, expected 2"),
        ("0, 1\n", ["index", " "], "empty name"),
    ],
)
def test_malformed_csv_is_a_parse_error(text: str, fields: list[str] | None, message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)):
        parse_query_csv(text, fields)


def test_wrong_column_count_in_a_stream_line() -> None:
    with pytest.raises(ParseError, match="has 2 columns, expected 3"):
        parse_query_line("0, 45", ["index", "utilization.gpu", "memory.used"])


def test_noheader_with_fields_and_no_output_is_no_rows() -> None:
    assert parse_query_csv("\n", ["index"]) == []


@pytest.mark.parametrize(
    ("value", "as_int", "as_float"),
    [(None, None, None), ("81559", 81559, 81559.0), ("45.0", 45, 45.0), ("0x233010DE", 0x233010DE, None)],
)
def test_numeric_helpers(value: str | None, as_int: int | None, as_float: float | None) -> None:
    assert to_int(value) == as_int
    if as_float is not None or value is None:
        assert to_float(value) == as_float


@pytest.mark.parametrize("value", ["P0", "nan", "inf", "12.5.1"])
def test_numeric_helpers_refuse_non_numbers(value: str) -> None:
    with pytest.raises(ParseError, match="expected a"):
        to_float(value)
    with pytest.raises(ParseError, match="expected a"):
        to_int(value)
