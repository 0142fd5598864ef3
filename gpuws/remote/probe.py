"""The inventory probe: host facts and `nvidia-smi -q -x` in one round trip over any runner.

`PROBE_SCRIPT` is our own constant, run as `sh -c PROBE_SCRIPT`; nothing from the user or the
profile is ever put into it. It prints `key=value` facts, then the XML between two marker lines,
so the whole probe costs one channel on an existing connection.
"""

from __future__ import annotations

import re

from gpuws.core.errors import NoNvidiaDriver, ParseError
from gpuws.core.inventory import GpuInfo, HostFacts, Inventory
from gpuws.core.nvsmi import split_document
from gpuws.core.nvsmi.xml_inventory import (
    impossible_readings,
    is_simulated_xml,
    parse_nvidia_smi_xml,
    unanswered_gpus,
)
from gpuws.core.runner import CommandRunner
from gpuws.core.simulation import SIM_ENV_VAR
from gpuws.remote.budget import SMALL_ANSWER

XML_BEGIN = "@@gpuws-nvidia-smi-xml@@"
XML_END = "@@gpuws-nvidia-smi-rc"

# find_spec looks modules up without importing them: `import torch` alone can take seconds.
_PY_CHECK = (
    "import importlib.util as u\n"
    "for k, m in (('nvml', 'pynvml'), ('torch', 'torch'), ('cupy', 'cupy')):\n"
    "    print('has_%s=%d' % (k, u.find_spec(m) is not None))\n"
)

PROBE_SCRIPT = rf"""
export LC_ALL=C
echo "hostname=$(hostname 2>/dev/null || cat /etc/hostname 2>/dev/null)"
[ -r /etc/os-release ] && sed -n 's/^PRETTY_NAME=/os=/p' /etc/os-release
echo "kernel=$(uname -r 2>/dev/null)"
echo "cpu_count=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null)"
sed -n 's/^MemTotal: *\([0-9]*\) kB/mem_kib=\1/p' /proc/meminfo 2>/dev/null
echo "simulated=${{{SIM_ENV_VAR}:-}}"
if command -v python3 >/dev/null 2>&1; then
  echo "has_python3=1"
  if command -v timeout >/dev/null 2>&1; then t="timeout 20"; else t=; fi
  $t python3 -c "{_PY_CHECK}" 2>/dev/null
fi
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then echo "has_nvcc=1"; fi
if command -v nvidia-smi >/dev/null 2>&1; then
  echo "{XML_BEGIN}"
  nvidia-smi -q -x
  rc=$?
  printf '\n{XML_END} %s\n' "$rc"
  # The XML has no compute capability; drivers since 510 answer this query (older ones: nothing).
  nvidia-smi --query-gpu=index,compute_cap --format=csv,noheader 2>/dev/null | sed 's/^/compute_cap=/'
else
  echo "nvidia_smi=missing"
fi
"""


class NoDriverFound(NoNvidiaDriver):
    """The host answers, but has no working NVIDIA driver (nvidia-smi missing or failing)."""


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() not in ("", "0", "false", "no")


def _int(value: str | None) -> int | None:
    try:
        return int((value or "").strip())
    except ValueError:
        return None


def _parse_facts(lines: list[str]) -> dict[str, str]:
    facts: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[a-z_0-9]+", key):
            facts[key] = value.strip()
    return facts


def _host_facts(facts: dict[str, str]) -> HostFacts:
    mem_kib = _int(facts.get("mem_kib"))
    return HostFacts(
        hostname=facts.get("hostname") or None,
        os=facts.get("os", "").strip("\"'") or None,
        kernel=facts.get("kernel") or None,
        cpu_count=_int(facts.get("cpu_count")),
        ram_mib=mem_kib // 1024 if mem_kib is not None else None,
        has_python3=_truthy(facts.get("has_python3")),
        has_nvml=_truthy(facts.get("has_nvml")),
        has_torch=_truthy(facts.get("has_torch")),
        has_cupy=_truthy(facts.get("has_cupy")),
        has_nvcc=_truthy(facts.get("has_nvcc")),
        simulated=_truthy(facts.get("simulated")),
    )


def parse_probe_output(stdout: str, stderr: str = "") -> tuple[Inventory, str | None]:
    """The inventory from `PROBE_SCRIPT`'s output, and why there is no driver (None if there is)."""
    head, begin, rest = stdout.partition(XML_BEGIN + "\n")
    facts = _parse_facts(head.splitlines())
    if "hostname" not in facts:
        raise ParseError("probe output is not what the probe script prints (no hostname line)")
    host = _host_facts(facts)
    if not begin:
        host.driver_found = False
        return Inventory(host, []), "nvidia-smi is not installed"
    xml, end, tail = rest.rpartition("\n" + XML_END + " ")
    status = _int(tail.splitlines()[0] if tail else None)
    if not end or status is None:
        raise ParseError("probe output was cut off inside the nvidia-smi XML")
    if status != 0 and "<nvidia_smi_log" not in xml:
        host.driver_found = False
        detail = (stderr.strip() or xml.strip() or f"exit status {status}").splitlines()[0]
        return Inventory(host, []), f"nvidia-smi failed: {detail[:200]}"
    # Warnings nvidia-smi prints on stdout before or after its XML are shown, not parsed as XML.
    document, around = split_document(xml)
    gpus = parse_nvidia_smi_xml(document or xml)
    xml = document or xml
    _merge_compute_capability(gpus, tail.splitlines()[1:])
    # Simulated by the XML marker or the host's env var; a real XML never carries the marker.
    host.simulated = host.simulated or is_simulated_xml(xml)
    warnings = [f"nvidia-smi gave a reading no working GPU gives: {bad}" for bad in impossible_readings(xml)]
    warnings += [f"{gone}: {gone.meaning}" for gone in unanswered_gpus(xml)]
    warnings += [f"nvidia-smi also printed: {line[:200]}" for line in around[:8]]
    # A GPU that fell off the bus is left out of the XML; nvidia-smi says so on stderr only.
    warnings += [f"nvidia-smi cannot reach a GPU: {line.strip()[:200]}" for line in stderr.splitlines()
                 if "unable to determine the device handle" in line.lower()][:8]
    return Inventory(host, gpus, warnings), None


def _merge_compute_capability(gpus: list[GpuInfo], lines: list[str]) -> None:
    """Fill `compute_capability` from `compute_cap=INDEX, X.Y` lines (absent on old drivers)."""
    by_index = {g.index: g for g in gpus}
    for line in lines:
        match = re.fullmatch(r"compute_cap=(\d+), *(\d+\.\d+)", line.strip())
        if match and int(match.group(1)) in by_index:
            by_index[int(match.group(1))].compute_capability = match.group(2)


async def probe(runner: CommandRunner, *, timeout: float = 60.0, require_driver: bool = False,
                host_label: str | None = None) -> Inventory:
    """Gather the host's facts and GPUs. Without a driver: `host.driver_found` is False, or,
    with `require_driver`, NoDriverFound is raised. Raises ParseError on malformed output."""
    # Facts, one `-q -x` and a line per GPU: small, so a flooding nvidia-smi is stopped at a few MiB.
    result = await runner.run(["sh", "-c", PROBE_SCRIPT], timeout=timeout, max_output=SMALL_ANSWER)
    inventory, no_driver = parse_probe_output(result.stdout, result.stderr)
    if no_driver is not None and require_driver:
        name = host_label or inventory.host.hostname or "the host"
        raise NoDriverFound(f"no NVIDIA driver found on {name} ({no_driver})")
    return inventory
