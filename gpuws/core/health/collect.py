"""What `gpuws health` runs on the host (one POSIX sh script, nothing left behind), how its output
is split into sections, and how the sections become a judged `HostHealth`.

The script only reads: `nvidia-smi -q -x`, `nvidia-smi nvlink -e` / `-s`, the `NVRM: Xid` lines
of the kernel log since boot (`journalctl -k -b`, else `dmesg`; if neither can be read, the reason),
the host name and the cloud instance id where the DMI board asset tag holds it (AWS), and with
`--dcgm` `dcgmi diag -r 1 -j` where dcgmi exists.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuws.core.errors import ParseError
from gpuws.core.health.checks import (
    Finding,
    HealthVerdict,
    HostHealth,
    cuda_finding,
    expectation_findings,
    gpu_findings,
    readings_finding,
)
from gpuws.core.health.facts import parse_nvlink, parse_smi_document
from gpuws.core.jsontypes import JsonObject, JsonValue
from gpuws.core.nvsmi._xmldoc import split_document
from gpuws.core.xid import XidEvent, parse_xid_lines

MARK = "@@gpuws-health "
RC_MARK = "@@rc "
MAX_OUTPUT_CHARS = 8_000_000  # a kernel log filtered to XID lines and one XML: far below this

# $1 = 1 to run dcgmi diag -r 1. Each section starts with "@@gpuws-health NAME"; a command's exit
# status follows it as "@@rc N". Every marker is printed after a newline of its own, so that a
# command whose output lacks a final newline (`nvidia-smi -q -x` ends with `</nvidia_smi_log>`
# and no newline on some drivers and wrappers) never has a marker glued to its last line;
# `split_sections` takes that framing newline off again.
SCRIPT = r"""
dcgm=$1
printf '\n@@gpuws-health hostname\n'; hostname 2>/dev/null || cat /proc/sys/kernel/hostname
printf '\n@@gpuws-health instance\n'; cat /sys/devices/virtual/dmi/id/board_asset_tag 2>/dev/null
printf '\n@@gpuws-health uptime\n'; cat /proc/uptime 2>/dev/null
printf '\n@@gpuws-health smi\n'; nvidia-smi -q -x 2>&1; printf '\n@@rc %s\n' "$?"
printf '\n@@gpuws-health nvlink-e\n'; nvidia-smi nvlink -e 2>&1; printf '\n@@rc %s\n' "$?"
printf '\n@@gpuws-health nvlink-s\n'; nvidia-smi nvlink -s 2>&1; printf '\n@@rc %s\n' "$?"
src=; why=; out=
if command -v journalctl >/dev/null 2>&1; then
  out=$(journalctl -k -b -q --no-pager 2>/dev/null)
  if [ -n "$out" ]; then src=journalctl
  else why="journalctl -k shows this user no kernel messages (not in group adm or systemd-journal)"; fi
fi
if [ -z "$src" ] && command -v dmesg >/dev/null 2>&1; then
  out=$(dmesg 2>&1); rc=$?
  if [ "$rc" -eq 0 ] && [ -n "$out" ]; then src=dmesg
  else why="${why:+$why; }dmesg: $(printf '%s\n' "$out" | head -n 1)"; fi
fi
printf '\n@@gpuws-health kernel %s\n' "${src:-none}"
if [ -n "$src" ]; then printf '%s\n' "$out" | grep -F 'NVRM: Xid' | tail -n 2000
else printf '%s\n' "${why:-neither journalctl nor dmesg is on the host}"; fi
if [ "$dcgm" = 1 ]; then
  printf '\n@@gpuws-health dcgm\n'
  if command -v dcgmi >/dev/null 2>&1; then dcgmi diag -r 1 -j 2>&1; printf '\n@@rc %s\n' "$?"
  else printf 'dcgmi is not installed on the host\n\n@@rc 127\n'; fi
fi
"""


def script_argv(dcgm: bool) -> list[str]:
    """The argv that runs the health script on the host."""
    return ["sh", "-c", SCRIPT, "gpuws-health", "1" if dcgm else "0"]


@dataclass
class Section:
    """One section of the script's output: its text, its argument and the command's exit status."""

    text: str = ""
    arg: str = ""
    rc: int | None = None


@dataclass
class Sections:
    """The script's output by section name."""

    parts: dict[str, Section] = field(default_factory=dict)

    def get(self, name: str) -> Section | None:
        """The section `name`, or None when the script did not print it."""
        return self.parts.get(name)


def split_sections(output: str) -> Sections:
    """Split the script's output at its markers; text before the first marker is ignored.

    The script prints a newline before each marker (see SCRIPT), which is taken off again here:
    a section's text is the same whether its command ended with a newline or not. Output from
    before that framing (markers right after the text) reads the same.
    """
    if len(output) > MAX_OUTPUT_CHARS:
        raise ParseError(f"health output is {len(output)} characters, more than {MAX_OUTPUT_CHARS}: refused")
    out = Sections()
    current: Section | None = None
    lines: list[str] = []
    ended = False  # the section's exit status came: what follows it up to the next marker is framing
    for line in output.splitlines():
        if line.startswith(MARK):
            _close(current, lines, ended)
            name, _, arg = line[len(MARK):].strip().partition(" ")
            current, lines, ended = Section(arg=arg.strip()), [], False
            out.parts[name] = current
        elif line.startswith(RC_MARK) and current is not None and not ended:
            _close(current, lines, ended)
            ended = True
            rc = line[len(RC_MARK):].strip()
            current.rc = int(rc) if rc.isdigit() else None
        elif not ended:
            lines.append(line)
    _close(current, lines, ended)
    return out


def _close(section: Section | None, lines: list[str], ended: bool) -> None:
    """Set the text of `section` (unless its exit status already ended it), without the framing newline."""
    if section is not None and not ended:
        section.text = "\n".join(lines[:-1] if lines and lines[-1] == "" else lines)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:200]


def _kernel_events(section: Section | None) -> tuple[list[XidEvent] | None, Finding]:
    if section is None:
        return None, Finding("kernel_log", HealthVerdict.INCONCLUSIVE, "the kernel log was not read")
    if section.arg in ("journalctl", "dmesg"):
        events = parse_xid_lines(section.text)
        lines = f"{len(events)} XID line{'' if len(events) == 1 else 's'}"
        if not events:
            return events, Finding("kernel_log", HealthVerdict.HEALTHY,
                                   f"kernel log since boot read with {section.arg}: {lines}")
        # The log was read; what its XIDs mean is judged on each GPU (never "healthy" here beside a
        # GPU made unhealthy by them).
        return events, Finding("kernel_log", HealthVerdict.INFO,
                               f"kernel log since boot read with {section.arg}: {lines}, judged on each GPU")
    return None, Finding("kernel_log", HealthVerdict.INCONCLUSIVE,
                         f"the kernel log cannot be read, so XIDs since boot are unknown: {_first_line(section.text)}")


def smi_warning_findings(lines: list[str]) -> list[Finding]:
    """What nvidia-smi printed beside its XML. A GPU it cannot reach is lost (unhealthy); a corrupted
    infoROM (the card's store of its configuration, ECC and retired-page records) is a fault of the
    card (degraded); anything else is shown."""
    # "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error" (or "...: GPU is
    # lost. Reboot the system to recover this GPU"): a GPU the host has, missing from the XML.
    lost = [line for line in lines if "unable to determine the device handle" in line.lower()
            or "gpu is lost" in line.lower()]
    out = [Finding("gpu_lost", HealthVerdict.UNHEALTHY, f"nvidia-smi cannot reach a GPU: {line[:200]} (it is "
                                                        "left out of the report; it needs a reset, usually a "
                                                        "reboot of the host)")
           for line in lost[:8]]
    inforom = [line for line in lines if "inforom" in line.lower() and "corrupt" in line.lower()]
    out += [Finding("inforom", HealthVerdict.DEGRADED, f"nvidia-smi warns: {line[:200]} (the card's records of ECC "
                                                      "errors and retired pages cannot be trusted; NVIDIA's "
                                                      "remedy is an infoROM reflash or a return)")
           for line in inforom[:8]]
    others = [line for line in lines if line not in inforom and line not in lost]
    if others:
        shown = "; ".join(line[:200] for line in others[:3]) + (f"; and {len(others) - 3} more lines"
                                                                 if len(others) > 3 else "")
        out.append(Finding("nvidia-smi", HealthVerdict.INFO, f"nvidia-smi also printed: {shown}"))
    return out


def dcgm_findings(section: Section | None) -> list[Finding]:
    """`dcgmi diag -r 1 -j`: a failed test is unhealthy, a warning degraded; absence is said."""
    if section is None:
        return []
    if section.rc == 127:
        return [Finding("dcgm", HealthVerdict.INFO, "dcgmi is not installed on the host: DCGM diagnostics not run")]
    try:
        data = json.loads(section.text[section.text.find("{"):]) if "{" in section.text else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return [Finding("dcgm", HealthVerdict.INCONCLUSIVE, f"dcgmi diag gave no JSON: {_first_line(section.text)}")]
    failed: list[str] = []
    warned: list[str] = []
    passed = 0

    def walk(node: JsonValue, test: str) -> None:
        nonlocal passed
        if isinstance(node, dict):
            name = str(node.get("name") or node.get("test_name") or test)
            status = str(node.get("status") or node.get("result") or "")
            low = status.lower()
            if low.startswith("fail"):
                gpus = node.get("gpu_ids", node.get("gpu_id", node.get("entity_id", "-")))
                failed.append(f"{name} (GPU {gpus})")
            elif low.startswith("warn"):
                warned.append(name)
            elif low == "pass":
                passed += 1
            for value in node.values():
                walk(value, name)
        elif isinstance(node, list):
            for item in node:
                walk(item, test)

    walk(data, "dcgm")
    if failed:
        return [Finding("dcgm", HealthVerdict.UNHEALTHY, f"dcgmi diag -r 1 failed: {', '.join(failed[:8])}")]
    if warned:
        return [Finding("dcgm", HealthVerdict.DEGRADED, f"dcgmi diag -r 1 warned: {', '.join(warned[:8])}")]
    return [Finding("dcgm", HealthVerdict.HEALTHY, f"dcgmi diag -r 1: {passed} results passed")]


def evaluate(host: str, output: str, *, expected: Mapping[str, object] | None = None,
             cuda: str | None = None) -> HostHealth:
    """Judge the health script's `output` for `host`."""
    sections = split_sections(output)
    health = HostHealth(host=host)
    name = sections.get("hostname")
    health.hostname = _first_line(name.text) if name else None
    instance = sections.get("instance")
    health.instance_id = _first_line(instance.text) or None if instance else None
    smi = sections.get("smi")
    # The script merges stderr: warnings nvidia-smi prints beside the XML are split off and judged.
    xml, around = split_document(smi.text) if smi else ("", [])
    if smi is None or smi.rc == 127 or not xml:
        why = _first_line(smi.text) if smi else "the health script did not run"
        verdict = HealthVerdict.INCONCLUSIVE
        if smi is not None and smi.rc not in (None, 0, 127):
            verdict = HealthVerdict.UNHEALTHY  # the driver answers with an error: "No devices were found", ...
        health.findings.append(Finding("nvidia-smi", verdict, f"nvidia-smi -q -x failed: {why or 'no output'}"))
        return health
    doc = parse_smi_document(xml)
    health.findings.extend(smi_warning_findings(around))
    whole = readings_finding(doc.bad_readings)
    if whole is not None:
        health.findings.append(whole)
    health.driver_version, health.cuda_version, health.simulated = doc.driver_version, doc.cuda_version, doc.simulated
    uptime = sections.get("uptime")
    try:
        uptime_s: float | None = float(uptime.text.split()[0]) if uptime and uptime.text.strip() else None
    except ValueError:
        uptime_s = None
    events, kernel = _kernel_events(sections.get("kernel"))
    health.findings.append(kernel)
    nv_e, nv_s = sections.get("nvlink-e"), sections.get("nvlink-s")
    links = parse_nvlink(nv_e.text if nv_e else "", nv_s.text if nv_s else "")
    for gpu in doc.gpus:
        g = gpu_findings(gpu, events, links.get(gpu.uuid or ""), uptime_s)
        if events is None:
            g.findings.append(Finding("xid", HealthVerdict.INCONCLUSIVE, kernel.detail))
        health.gpus.append(g)
    if expected:
        health.findings.extend(expectation_findings(doc, expected))
    if cuda:
        health.findings.append(cuda_finding(doc.driver_version, doc.cuda_version, cuda))
    health.findings.extend(dcgm_findings(sections.get("dcgm")))
    return health


def provider_report(health: HostHealth) -> str:
    """Plain text to paste to the provider: identity, UUIDs, serials, each failing field."""
    out = [f"GPU health check of {health.host}: {health.verdict.value.upper()}"
           + (" (SIMULATED host)" if health.simulated else ""),
           f"hostname: {health.hostname or '-'}; instance id: {health.instance_id or '-'}",
           f"driver {health.driver_version or '-'}, CUDA {health.cuda_version or '-'}"]
    for f in health.findings:
        if f.verdict not in (HealthVerdict.HEALTHY, HealthVerdict.INFO):
            out.append(f"host: {f.check} {f.verdict.value}: {f.detail}")
    for g in health.gpus:
        out.append(f"GPU {g.index} {g.name or '?'} UUID {g.uuid or '-'} serial {g.serial or '-'}: "
                   f"{g.verdict.value.upper()}")
        for f in g.findings:
            if f.verdict not in (HealthVerdict.HEALTHY,):
                out.append(f"  {f.check} {f.verdict.value}: {f.detail}")
    return "\n".join(out)


def health_results(health: HostHealth) -> list[JsonObject]:
    """The findings as benchmark result lines ("health.<check>", per GPU or host-wide), so that
    `bench --check` scores and reports them with its own checks (gpuws.core.bench.verdicts)."""
    out: list[JsonObject] = []
    rows = [(None, f) for f in health.findings] + [(g.index, f) for g in health.gpus for f in g.findings]
    for gpu, f in rows:
        out.append({"type": "result", "check": f"health.{f.check}", "gpu": gpu, "value": None, "unit": None,
                    "status": "ok", "reason": f.detail, "harness": "gpu", "simulated": health.simulated,
                    "facts": {"verdict": f.verdict.value, "detail": f.detail}})
    return out
