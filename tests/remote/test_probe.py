"""The probe end to end: each real `nvidia-smi -q -x` capture served by a real sshd's host."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuws.core.errors import ParseError
from gpuws.core.inventory import Inventory
from gpuws.remote.connection import HostConnection
from gpuws.remote.probe import XML_BEGIN, XML_END, NoDriverFound, parse_probe_output, probe
from gpuws.remote.ssh_runner import RemoteOutputTooLarge
from tests.remote.helpers import key_profile, trust
from tests.support.real_fixtures import REAL_FIXTURES
from tests.support.sshd import SshdServer

pytestmark = pytest.mark.sshd

FIXTURES = REAL_FIXTURES / "nvidia-smi-xml"
XML_FILES = sorted(FIXTURES.glob("*.xml"))
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


def test_fixtures_are_there() -> None:
    assert len(XML_FILES) >= 10, f"real nvidia-smi XML captures missing under {FIXTURES}"


def fake_nvidia_smi(bin_dir: Path, body: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return bin_dir


@pytest.fixture
def host_with(tmp_path: Path, isolated_home: Path) -> Iterator[object]:
    """Start a real sshd whose PATH (and extra env) the test chooses; stopped afterwards."""
    servers: list[SshdServer] = []

    def start(path: str, **env: str) -> SshdServer:
        server = SshdServer(tmp_path / f"sshd{len(servers)}", env={"PATH": path, **env})
        servers.append(server)
        server.start()
        trust(server, isolated_home)
        return server

    yield start
    for server in servers:
        server.stop()


async def probe_server(server: SshdServer, **kwargs: object) -> Inventory:
    async with HostConnection(key_profile(server)) as conn:
        return await probe(conn.runner, **kwargs)  # type: ignore[arg-type]


def expected_gpus(xml_file: Path) -> list[tuple[str, int | None]]:
    """(product name, framebuffer MiB) per <gpu>, read straight from the capture (None where the
    capture has no size: an excerpt without the element, a lost GPU)."""
    root = ET.parse(xml_file).getroot()  # trusted local fixture
    sizes = [gpu.findtext("fb_memory_usage/total", "").split() for gpu in root.findall("gpu")]
    return [
        (gpu.findtext("product_name", "").strip(), int(size[0]) if size and size[0].isdigit() else None)
        for gpu, size in zip(root.findall("gpu"), sizes, strict=True)
    ]


@pytest.mark.parametrize("xml_file", XML_FILES, ids=[f.stem for f in XML_FILES])
async def test_probe_reads_each_real_capture_over_ssh(host_with: object, tmp_path: Path, xml_file: Path) -> None:
    bin_dir = fake_nvidia_smi(tmp_path / "bin", f'[ "$*" = "-q -x" ] || exit 2\nexec cat "{xml_file}"')
    server = host_with(f"{bin_dir}:{BASE_PATH}")  # type: ignore[operator]
    inventory = await probe_server(server, require_driver=True)

    assert [(g.name, g.memory_total_mib) for g in inventory.gpus] == expected_gpus(xml_file)
    root = ET.parse(xml_file).getroot()
    assert {g.driver_version for g in inventory.gpus} == {root.findtext("driver_version", "").strip() or None}
    assert [g.index for g in inventory.gpus] == list(range(len(inventory.gpus)))
    host = inventory.host
    assert host.driver_found and not host.simulated and not inventory.simulated
    assert host.hostname and host.kernel and host.cpu_count and host.cpu_count >= 1
    assert host.ram_mib and host.ram_mib > 100
    assert host.has_python3  # /usr/bin/python3 is on this test host's PATH


async def test_mig_capture_lists_its_mig_devices(host_with: object, tmp_path: Path) -> None:
    xml_file = FIXTURES / "a100-sxm4-v12.xml"
    bin_dir = fake_nvidia_smi(tmp_path / "bin", f'exec cat "{xml_file}"')
    inventory = await probe_server(host_with(f"{bin_dir}:{BASE_PATH}"))  # type: ignore[operator]
    assert inventory.gpus[0].mig_mode == "Enabled"
    assert len(inventory.gpus[0].mig_devices) == 4


async def test_no_nvidia_smi_is_no_driver(host_with: object, tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    server = host_with(f"{empty}:/bin")  # type: ignore[operator]
    inventory = await probe_server(server)
    assert not inventory.host.driver_found and inventory.gpus == []
    with pytest.raises(NoDriverFound, match=r"no NVIDIA driver found on gpu1 \(nvidia-smi is not installed\)"):
        await probe_server(server, require_driver=True, host_label="gpu1")


async def test_failing_nvidia_smi_is_no_driver_with_its_reason(host_with: object, tmp_path: Path) -> None:
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    bin_dir = fake_nvidia_smi(tmp_path / "bin", f'echo "{message}"; exit 9')
    server = host_with(f"{bin_dir}:{BASE_PATH}")  # type: ignore[operator]
    with pytest.raises(NoDriverFound, match="couldn't communicate with the NVIDIA driver"):
        await probe_server(server, require_driver=True)


async def test_simulated_host_env_labels_the_inventory(host_with: object, tmp_path: Path) -> None:
    xml_file = FIXTURES / "tesla-t4.xml"
    bin_dir = fake_nvidia_smi(tmp_path / "bin", f'exec cat "{xml_file}"')
    server = host_with(f"{bin_dir}:{BASE_PATH}", GPUWS_SIMULATED="1")  # type: ignore[operator]
    assert (await probe_server(server)).simulated


async def test_a_flooding_nvidia_smi_is_stopped_at_the_small_answer_cap(host_with: object, tmp_path: Path) -> None:
    # issue 28: the probe read up to the whole 64 MiB connection budget; its answer is well
    # under 1 MiB on a real 8-GPU host.
    flood = "printf '<nvidia_smi_log>'; yes '<gpu><product_name>NVIDIA H100</product_name></gpu>' | head -c 50000000"
    bin_dir = fake_nvidia_smi(tmp_path / "bin", flood)
    with pytest.raises(RemoteOutputTooLarge, match="sh on gpu1 wrote an output longer than 4 MiB"):
        await probe_server(host_with(f"{bin_dir}:{BASE_PATH}"))  # type: ignore[operator]


async def test_truncated_xml_is_a_parse_error(host_with: object, tmp_path: Path) -> None:
    xml_file = FIXTURES / "tesla-t4.xml"
    bin_dir = fake_nvidia_smi(tmp_path / "bin", f'head -c 2000 "{xml_file}"')
    with pytest.raises(ParseError):
        await probe_server(host_with(f"{bin_dir}:{BASE_PATH}"))  # type: ignore[operator]


def test_probe_output_without_facts_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_probe_output("Welcome to a weird shell\n")
    with pytest.raises(ParseError, match="cut off"):
        parse_probe_output("hostname=x\n@@gpuws-nvidia-smi-xml@@\n<nvidia_smi_log>")


def test_compute_capability_comes_from_the_query_after_the_xml() -> None:
    xml = (FIXTURES / "dual_2070-v13.xml").read_text()
    out = (
        "hostname=h\n" + XML_BEGIN + "\n" + xml + "\n" + XML_END + " 0\n"
        "compute_cap=0, 7.5\ncompute_cap=1, 7.5\ncompute_cap=9, 9.0\n"
    )
    inventory, no_driver = parse_probe_output(out)
    assert no_driver is None
    assert [g.compute_capability for g in inventory.gpus] == ["7.5", "7.5"]
