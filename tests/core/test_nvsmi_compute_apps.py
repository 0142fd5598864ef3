"""`--query-compute-apps` parsing against the real captures (gpu-burn and memhog processes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuws.core.errors import ParseError
from gpuws.core.nvsmi import COMPUTE_APP_FIELDS, ComputeApp, parse_compute_apps
from tests.core.nvsmi_fixtures import H100, H100_MIG, capture_section

UUID = "GPU-00000000-0000-0000-0000-000000000000"

LOADED = {
    H100: [
        ComputeApp(11327, "/root/tools/memhog", UUID, 2566),
        ComputeApp(11328, "/root/tools/memhog", UUID, 1542),
        ComputeApp(11345, "./gpu_burn", UUID, 15690),
    ],
    H100_MIG: [
        ComputeApp(21180, "/root/tools/memhog", UUID, 2296),
        ComputeApp(21181, "/root/tools/memhog", UUID, 1272),
        ComputeApp(21198, "./gpu_burn", UUID, 7484),
    ],
}


@pytest.mark.parametrize("path", list(LOADED), ids=lambda p: p.stem)
def test_real_capture_with_header_in_its_own_field_order(path: Path) -> None:
    assert parse_compute_apps(capture_section(path, "load :: query-compute-apps")) == LOADED[path]


@pytest.mark.parametrize("path", list(LOADED), ids=lambda p: p.stem)
def test_idle_capture_has_a_header_and_no_processes(path: Path) -> None:
    section = capture_section(path, "idle :: query-compute-apps")
    assert section.startswith("timestamp, gpu_name")
    assert parse_compute_apps(section) == []


def _as_default_query(path: Path, *, units: bool) -> str:
    """The real rows re-projected to `pid,process_name,gpu_uuid,used_memory --format=csv,noheader[,nounits]`."""
    lines = capture_section(path, "load :: query-compute-apps").splitlines()[1:]
    out = []
    for line in lines:
        cells = [c.strip() for c in line.split(",")]
        memory = cells[7] if units else cells[7].removesuffix(" MiB")
        out.append(", ".join([cells[5], cells[6], cells[4], memory]))
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("units", [True, False], ids=["units", "nounits"])
def test_default_noheader_query(units: bool) -> None:
    text = _as_default_query(H100, units=units)
    assert parse_compute_apps(text) == LOADED[H100]
    assert parse_compute_apps(text, COMPUTE_APP_FIELDS) == LOADED[H100]


def test_explicit_fields_in_another_order_and_alias() -> None:
    text = "GPU-abc, 4242, 512\n"
    assert parse_compute_apps(text, ["gpu_uuid", "pid", "used_gpu_memory"]) == [ComputeApp(4242, "", "GPU-abc", 512)]


def test_process_names_with_commas_are_kept_whole() -> None:
    text = "31337, python train.py --layers=1,2,3, GPU-abc, 2048\n"
    (app,) = parse_compute_apps(text)
    assert app == ComputeApp(31337, "python train.py --layers=1,2,3", "GPU-abc", 2048)


def test_unknown_memory_is_none_not_zero() -> None:
    (app,) = parse_compute_apps("77, [Insufficient Permissions], GPU-abc, [N/A]\n")
    assert app.used_memory_mib is None
    assert app.process_name == ""


def test_no_processes_notice_is_empty() -> None:
    assert parse_compute_apps("No running processes found\n") == []
    assert parse_compute_apps("") == []


@pytest.mark.parametrize(
    ("text", "fields", "message"),
    [
        ("abc, x, GPU-1, 10\n", None, "pid"),
        ("-5, x, GPU-1, 10\n", None, "no usable pid"),
        ("12, x, GPU-1, lots\n", None, "used_memory: expected a whole number"),
        ("12, GPU-1\n", ["pid", "gpu_uuid", "used_memory"], "has 2 columns, expected 3"),
        ("12\n", ["process_name"], "must include pid"),
    ],
)
def test_malformed_rows_are_parse_errors(text: str, fields: list[str] | None, message: str) -> None:
    with pytest.raises(ParseError, match=re.escape(message)):
        parse_compute_apps(text, fields)
