"""Scoring a benchmark run: each figure against the detected card's datasheet.

The runner on the host only measures; this module judges. Thresholds (ratio = measured / datasheet):

| check | datasheet figure | pass | warn | fail |
|---|---|---|---|---|
| gemm_fp32/tf32/fp16/bf16/fp8 | dense peak TFLOP/s | per model and format (GEMM_BY_MODEL, | | |
| | with the source of each row); else >= 0.70 | >= 0.50 | below; any wrong sampled answer or |
| | checksum (every element, banded Huang-Abraham against float64) fails; a checksum not computed |
| | is inconclusive |
| mem_copy, mem_triad | memory bandwidth GB/s | >= 0.75 | >= 0.55 | below |
| h2d, d2h (pinned) | PCIe one-direction bandwidth of the link | >= 0.70 | >= 0.45 | below |
| p2p | NVLink one direction (half the total) when `topo -m` shows NVLink between the pair (or both
| | cards have links up), else PCIe of the slower link of the two | >= 0.60 | >= 0.35 | below |
| scaling | efficiency = speedup / GPUs (no datasheet) | >= 0.80 | >= 0.60 | below |
| stress | elements differing bit for bit from the first GEMM, non-finite ones included | 0 | 0, but
| | HW/thermal throttling seen or the sustained (p10) rate fell under 75% of its peak | any mismatch |
| env.ecc | volatile uncorrected errors -> fail; aggregate uncorrected, or ECC off on an ECC card -> warn |
| env.retired_pages | retirement pending or row-remap failure -> fail; remap pending, double-bit |
| | retired pages or uncorrectable remapped rows -> warn |
| env.persistence | Disabled -> warn |
| env.pcie | link width below the card's maximum -> fail; the slot's maximum below the card's datasheet |
| | link (a Gen5 card in a Gen4 or x8 slot) -> warn (a lower generation at idle is power saving) |
| env.pcie_load | the link read again right after the host copies: below the slot's maximum -> warn |
| env.throttle_idle | HW slowdown / HW thermal / power brake at idle -> fail; SW thermal or power cap at idle -> warn |
| | (inconclusive when read while other processes used the GPU) |
| env.busy | other compute processes or utilisation on the GPU before the run -> warn |
| env.nvlink | fewer links up than present -> warn |
| env.driver | CUDA runtime newer than the driver supports: same major -> warn, newer major -> fail |
| env.topology | GPU count, MIG mode or model not as the profile expects -> fail |
| health.* | `bench --check` runs `gpuws health` first: unhealthy -> fail, degraded -> warn, |
| | inconclusive -> inconclusive, healthy and information -> pass |

Throughput figures are judged on their **sustained** value (the 10th percentile of the timed
windows; the median where a runner reported no windows), with the peak window shown beside it;
when throttle reasons were seen during a check whose verdict is warn or fail, they are named.
A copy whose destination differs from what was sent fails, whatever its speed; a copy that was not
verified is inconclusive. A figure measured while other processes used the GPU (`--allow-busy`)
is inconclusive ("GPU in use by N processes"), never a failure. A vGPU is a time slice of the
whole card (it gets the whole card during its slice), so it is judged against the whole card it is
cut from: at or above the pass line it passes, below it is inconclusive (other VMs' load cannot
be ruled out), never judged as a framebuffer share. A MIG slice stays inconclusive. A GEMM whose
answers were not checked against float64 is inconclusive: speed alone says nothing.

**Inconclusive** is its own verdict, never a pass: the check could not run (init error, zero
iterations, allocation failure, no toolchain, timeout), the model is unknown (no datasheet), the
GPU is a MIG or vGPU slice (a full-card datasheet says nothing about it), or the figure came from
the CPU harness ("CPU harness check — not a GPU measurement"), or a figure is more than 15% above
the datasheet (a wrong model or a broken timer, not a fast card). **Skipped** means not applicable
(e.g. FP8 on an A100, P2P with one GPU) and does not count either way.

A run's overall verdict: fail if anything failed, else inconclusive if anything was, else warn if
anything warned, else pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from gpuws.core.bench.datasheets import CATALOG, Datasheet, datasheet_for, detect_model, is_vgpu_name

CPU_LABEL = "CPU harness check \u2014 not a GPU measurement"
NO_TOOLCHAIN = (
    "no CUDA toolchain: install PyTorch with CUDA (pip install torch) or CuPy, or the CUDA toolkit (nvcc)"
)
GEMM_CHECKS = ("gemm_fp32", "gemm_tf32", "gemm_fp16", "gemm_bf16", "gemm_fp8")
PERF_CHECKS = (*GEMM_CHECKS, "mem_copy", "mem_triad", "h2d", "d2h", "p2p")
COPY_CHECKS = ("mem_copy", "h2d", "d2h", "p2p")
# Throttle reasons that cut throughput (idle and application clocks do not).
THROTTLE_CUTS = frozenset({"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown",
                           "sw_power_cap"})
# Framebuffer of the cards vGPU profiles are cut from, GB, by the profile's card name ("A100D" is
# the 80 GB A100 in NVIDIA's vGPU naming): a profile's framebuffer must fit its card.
VGPU_PARENT_MEMORY_GB = {"A100": 40, "A100D": 80, "A10": 24, "A16": 16, "A40": 48, "L4": 24, "L40": 48,
                         "L40S": 48, "H100": 80, "H100L": 94, "H200": 141, "T4": 16, "V100": 16, "V100D": 32}
_VGPU_PROFILE_RE = re.compile(r"\b([A-Z]\d+[A-Z]?)-(\d+)[ABCQ]\b")


class Verdict(StrEnum):
    """How one benchmark check scored."""

    PASS = "pass"  # noqa: S105 - a verdict, not a password
    WARN = "warn"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Thresholds:
    """Ratio limits: at or above `pass_at` passes, at or above `warn_at` warns, else fails."""

    pass_at: float
    warn_at: float

    def judge(self, ratio: float) -> Verdict:
        """The verdict of a measured/expected `ratio`."""
        if ratio >= self.pass_at:
            return Verdict.PASS
        return Verdict.WARN if ratio >= self.warn_at else Verdict.FAIL


GEMM = Thresholds(0.70, 0.50)  # the default where GEMM_BY_MODEL has no row


@dataclass(frozen=True)
class GemmRule:
    """GEMM thresholds for one model (None: every model) and format, with where the figure comes from."""

    model: str | None
    check: str
    rule: Thresholds
    source: str


# What healthy cards reach, as a fraction of the datasheet's dense peak, on the sustained (p10)
# window. The first row for (model, check) wins, then (None, check), then GEMM.
GEMM_BY_MODEL: tuple[GemmRule, ...] = (
    *(GemmRule(m, c, Thresholds(0.60, 0.45),
               "gpuws device check on a healthy H200, 2026-12-04 (tests/fixtures/real/h200/bench-quick.jsonl): "
               "sustained tf32 69 %, fp16 65 %, bf16 67 % of dense peak with sw_power_cap at 700 W (peak "
               "windows 76-78 %); about 75-80 % of dense bf16 on H100 SXM with a tuned GEMM (issue #25)")
      for m in ("H100 SXM", "H200") for c in ("gemm_tf32", "gemm_fp16", "gemm_bf16")),
    *(GemmRule(m, "gemm_fp8", Thresholds(0.55, 0.40),
               "the same H200 capture: fp8 (_scaled_mm, fast accumulation) sustained 64 %, peak window 75 %")
      for m in ("H100 SXM", "H200")),
    # PCIe / NVL variants run the same silicon at 350-400 W: lower sustained clocks than SXM.
    *(GemmRule(m, c, Thresholds(0.50, 0.35),
               "power-capped PCIe/NVL variant (350-400 W): issue #25 review, H100 PCIe/NVL often below 70 %")
      for m in ("H100 PCIe", "H100 NVL", "H200 NVL") for c in ("gemm_tf32", "gemm_fp16", "gemm_bf16")),
    *(GemmRule(m, "gemm_fp8", Thresholds(0.45, 0.30), "power-capped PCIe/NVL variant, FP8 (see above)")
      for m in ("H100 PCIe", "H100 NVL", "H200 NVL")),
    # 70 W T4: "about 24 of 65 TFLOP/s fp16 at 70 W" (issue #25), i.e. 37 %.
    GemmRule("T4", "gemm_fp16", Thresholds(0.30, 0.20),
             "T4 at its 70 W limit: about 24 of 65 TFLOP/s fp16 (issue #25)"),
    GemmRule("T4", "gemm_fp32", Thresholds(0.50, 0.35), "T4 at its 70 W limit: clocks well under boost"),
    # 72 W L4: tensor formats run at the power limit.
    *(GemmRule("L4", c, Thresholds(0.45, 0.30), "L4 at its 72 W limit (issue #25: often warns at 70 %)")
      for c in ("gemm_tf32", "gemm_fp16", "gemm_bf16", "gemm_fp8")),
    GemmRule(None, "gemm_fp8", Thresholds(0.55, 0.40),
             "FP8 through torch._scaled_mm typically reaches 60-70 % of the dense FP8 peak (issue #25)"),
)


def gemm_rule(model: str | None, check: str) -> GemmRule:
    """The GEMM thresholds for `model` (a datasheet model name) and `check`."""
    for row in GEMM_BY_MODEL:
        if row.check == check and row.model == model:
            return row
    for row in GEMM_BY_MODEL:
        if row.check == check and row.model is None:
            return row
    return GemmRule(None, check, GEMM, "gpuws default: 70 % of the dense peak passes, 50 % warns")
MEMORY = Thresholds(0.75, 0.55)
HOST_LINK = Thresholds(0.70, 0.45)
PEER = Thresholds(0.60, 0.35)
SCALING = Thresholds(0.80, 0.60)
# `gpuws health` findings in `bench --check`: degraded warns (the card works, below what was sold).
_HEALTH_VERDICT = {"healthy": Verdict.PASS, "info": Verdict.PASS, "degraded": Verdict.WARN,
                   "unhealthy": Verdict.FAIL, "inconclusive": Verdict.INCONCLUSIVE}
# A figure this far above the datasheet is not a fast card but a wrong model or a broken timer.
IMPLAUSIBLE_RATIO = 1.15


@dataclass
class Outcome:
    """One scored line of a report."""

    check: str
    gpu: int | None
    verdict: Verdict
    reason: str = ""
    measured: float | None = None
    datasheet: float | None = None
    ratio: float | None = None
    unit: str | None = None
    harness: str = "gpu"
    simulated: bool = False
    peer: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return d


@dataclass
class GpuContext:
    """What scoring needs to know about one GPU: its name, datasheet and slice state."""

    index: int
    name: str
    model: str | None
    datasheet: Datasheet | None
    mig: bool = False
    vgpu: bool = False
    link_gen_max: int | None = None
    link_width_max: int | None = None
    nvlink_active: int = 0
    links: dict[int, str] = field(default_factory=dict)  # peer index -> `topo -m` code (NV12, PIX...)
    busy: dict[str, Any] | None = None  # other processes on the GPU before the run

    @property
    def unscorable(self) -> str | None:
        """Why this GPU's figures cannot be held against a datasheet, or None."""
        if self.mig:
            return "MIG enabled: a slice is not comparable to the full card's datasheet"
        if self.vgpu and self.datasheet is None:
            return "vGPU slice of an unknown card: no datasheet to compare with"
        if self.datasheet is None:
            return f"unknown model {self.name!r}: no datasheet to compare with"
        return None


def vgpu_parent(name: str) -> Datasheet | None:
    """The card a vGPU profile such as "GRID A100-10C" is cut from (its framebuffer must fit it)."""
    match = _VGPU_PROFILE_RE.search(name.upper())
    if not match:
        return None
    card, framebuffer = match.group(1), int(match.group(2))
    total = VGPU_PARENT_MEMORY_GB.get(card)
    base = card[:-1] if card.endswith(("D", "L")) and card[:-1] in VGPU_PARENT_MEMORY_GB else card
    model = {"A100": "A100 40GB PCIe", "A100D": "A100 80GB PCIe"}.get(card) or detect_model(f"NVIDIA {base}")
    ds = CATALOG.get(model) if model else None
    if total is None or ds is None or not 0 < framebuffer <= total:
        return None
    return ds


def gpu_contexts(summary: Mapping[str, Any], results: Iterable[Mapping[str, Any]]) -> dict[int, GpuContext]:
    """GPU contexts from the runner's summary (names, MIG) and environment facts (links)."""
    contexts: dict[int, GpuContext] = {}
    for g in summary.get("gpus") or []:
        try:
            index = int(g["index"])
        except (KeyError, TypeError, ValueError):
            continue
        name = str(g.get("name") or "unknown")
        contexts[index] = GpuContext(
            index=index,
            name=name,
            model=detect_model(name),
            datasheet=datasheet_for(name),
            mig=str(g.get("mig_mode") or "").lower() == "enabled",
            vgpu=is_vgpu_name(name),
        )
        if contexts[index].vgpu:
            found = vgpu_parent(name)
            if found is not None:
                # A time-sliced vGPU gets the whole card during its slice: scored against the
                # whole card (a low figure is then inconclusive, see _score_against_datasheet).
                contexts[index].datasheet = found
                contexts[index].model = found.model
    for r in results:
        gpu = r.get("gpu")
        ctx = contexts.get(gpu) if isinstance(gpu, int) else None
        facts = r.get("facts") or {}
        if ctx is None or not isinstance(facts, dict):
            continue
        if r.get("check") == "env.pcie":
            ctx.link_gen_max = _int(facts.get("gen_max"))
            ctx.link_width_max = _int(facts.get("width_max"))
        elif r.get("check") == "env.nvlink":
            ctx.nvlink_active = _int(facts.get("links_active")) or 0
        elif r.get("check") == "env.busy" and facts.get("busy"):
            ctx.busy = dict(facts)
    for r in results:
        links = (r.get("facts") or {}).get("links") if r.get("check") == "env.topology" else None
        for pair, code in (links or {}).items() if isinstance(links, dict) else ():
            a, _, b = str(pair).partition("-")
            if a.isdigit() and b.isdigit() and int(a) in contexts:
                contexts[int(a)].links[int(b)] = str(code)
    return contexts


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def score_result(r: Mapping[str, Any], contexts: Mapping[int, GpuContext],
                 expected: Mapping[str, Any] | None = None) -> Outcome:
    """Score one runner result line."""
    check = str(r.get("check") or "unknown")
    gpu = r.get("gpu") if isinstance(r.get("gpu"), int) else None
    harness = str(r.get("harness") or "gpu")
    base = Outcome(
        check=check, gpu=gpu, verdict=Verdict.INCONCLUSIVE, measured=_num(r.get("value")),
        unit=r.get("unit"), harness=harness, simulated=bool(r.get("simulated")),
        peer=r.get("peer") if isinstance(r.get("peer"), int) else None,
        details=dict(r.get("details") or r.get("facts") or {}),
    )
    status = r.get("status")
    if check.startswith("health.") and status == "ok":
        # A finding of `gpuws health` run first by `bench --check` (gpuws.core.health).
        found = str((r.get("facts") or {}).get("verdict") or "")
        base.verdict = _HEALTH_VERDICT.get(found, Verdict.INCONCLUSIVE)
        base.reason = str(r.get("reason") or found)
        return base
    if status == "skipped":
        base.verdict, base.reason = Verdict.SKIPPED, str(r.get("reason") or "not applicable")
        return base
    answers = base.details.get("answers")
    summed = base.details.get("checksum")
    if check in GEMM_CHECKS and isinstance(summed, dict) and (summed.get("wrong") or summed.get("nonfinite")):
        # Every element is in two checksums: one wrong element, one wrong tile, one NaN fails.
        base.verdict = Verdict.FAIL
        base.reason = "wrong answers: " + checksum_words(summed)
        return base
    if check in GEMM_CHECKS and isinstance(answers, dict) and (answers.get("wrong") or answers.get("nonfinite")):
        # Checked before anything else: a wrong answer fails however fast or short the run was.
        base.verdict = Verdict.FAIL
        where = answers.get("first_wrong")
        base.reason = (f"wrong answers: {answers.get('wrong')} of {answers.get('checked')} sampled elements differ "
                       f"from float64 by more than {answers.get('tolerance')} of their row's largest element "
                       f"(worst {answers.get('max_rel_error')}; {answers.get('nonfinite') or 0} not finite"
                       + (f"; first at row {where[0]}, column {where[1]}" if isinstance(where, list) else "") + ")")
        return base
    if status != "ok":
        base.reason = str(r.get("reason") or "could not run")
        return base
    if check.startswith("env."):
        return _score_env(base, r.get("facts") or {}, contexts.get(gpu) if gpu is not None else None, expected)
    if check == "toolchain":
        base.verdict, base.reason = Verdict.PASS, f"backend {base.details.get('backend')}"
        return base
    if check == "stress":
        return _score_stress(base)
    if check in GEMM_CHECKS and not isinstance(answers, dict) and harness != "cpu" and base.measured is not None:
        base.reason = "the GEMM's answers were not checked: its speed alone says nothing"
        return base
    if check in GEMM_CHECKS and isinstance(summed, dict) and summed.get("error"):
        base.reason = f"the GEMM's checksum could not be computed ({summed['error']}): not every element was verified"
        return base
    if check in COPY_CHECKS and base.measured is not None:
        verify = base.details.get("verify")
        bad = _int(verify.get("bad_bytes")) if isinstance(verify, dict) else None
        if bad:
            base.verdict = Verdict.FAIL
            base.reason = (f"copy corrupted: {bad} of {verify.get('checked_bytes')} bytes differ from what was sent"
                           if isinstance(verify, dict) else "copy corrupted")
            return base
        if bad is None and harness != "cpu":
            base.reason = "the copy was not verified (its destination was never compared with what was sent)"
            return base
    busy = r.get("busy")
    if check in PERF_CHECKS and isinstance(busy, dict) and busy.get("busy"):
        base.reason = _busy_text(busy) + ": a shared card's throughput says nothing about the card"
        return base
    if harness == "cpu":
        base.reason = CPU_LABEL
        return base
    if base.measured is None:
        base.reason = "no figure was reported"
        return base
    if check == "scaling":
        base.ratio = base.measured
        base.verdict = SCALING.judge(base.measured)
        base.reason = "speedup / GPUs" + (" (flagged: under 0.8)" if base.measured < 0.8 else "")
        return base
    peer = contexts.get(base.peer) if base.peer is not None else None
    return _score_against_datasheet(base, contexts.get(gpu) if gpu is not None else None, peer)


def _busy_text(busy: Mapping[str, Any]) -> str:
    util = busy.get("utilization_pct")
    return f"GPU in use by {busy.get('processes', 0)} processes" + (
        f" ({util}% utilisation)" if util is not None else "")


def _throttle_note(details: Mapping[str, Any], ignore: frozenset[str] = frozenset()) -> str | None:
    """"throttled: hw_slowdown (SM clock 660-1980 MHz)" when a throughput-cutting reason (other
    than those in `ignore`) was seen."""
    telemetry = details.get("telemetry") or {}
    if not isinstance(telemetry, dict):
        return None
    seen = sorted(set(telemetry.get("throttle_reasons_seen") or []) & (THROTTLE_CUTS - ignore))
    if not seen:
        return None
    lo, hi = telemetry.get("sm_clock_min_mhz"), telemetry.get("sm_clock_max_mhz")
    clocks = f" (SM clock {_fmt_num(lo)}-{_fmt_num(hi)} MHz)" if lo is not None and hi is not None else ""
    return "throttled: " + ", ".join(seen) + clocks


def _fmt_num(value: Any) -> str:
    num = _num(value)
    return "?" if num is None else f"{num:,.0f}"


def _link_peak(ds: Datasheet, ctx: GpuContext) -> tuple[int, int]:
    gen = min(ctx.link_gen_max or ds.pcie_gen, ds.pcie_gen)
    width = min(ctx.link_width_max or ds.pcie_width, ds.pcie_width)
    return gen, width


def _p2p_peak(ds: Datasheet, ctx: GpuContext, peer: GpuContext | None) -> tuple[float | None, str]:
    """A pair is bounded by the slower of its two links; NVLink where `topo -m` shows it."""
    peer_ds = peer.datasheet if peer is not None and peer.unscorable is None else None
    code = ctx.links.get(peer.index, "") if peer is not None else ""
    nvlinks = [d.nvlink_gb_s for d in (ds, peer_ds) if d is not None]
    on_nvlink = code.upper().startswith("NV") if code else (
        ctx.nvlink_active > 0 and (peer is None or peer.nvlink_active > 0))
    if on_nvlink and nvlinks and all(nvlinks):
        return min(float(x) for x in nvlinks if x) / 2, "NVLink, one direction"
    gen, width = _link_peak(ds, ctx)
    peak, what = ds.pcie_gb_s(gen, width), f"PCIe Gen{gen} x{width}"
    if peer is not None and peer_ds is not None:
        pgen, pwidth = _link_peak(peer_ds, peer)
        other = peer_ds.pcie_gb_s(pgen, pwidth)
        if other is not None and (peak is None or other < peak):
            peak, what = other, f"PCIe Gen{pgen} x{pwidth} of gpu{peer.index}, the slower link of the pair"
    return peak, what


def _score_against_datasheet(o: Outcome, ctx: GpuContext | None, peer: GpuContext | None = None) -> Outcome:
    if ctx is None:
        o.reason = "no GPU information for this figure"
        return o
    if ctx.unscorable:
        o.reason = ctx.unscorable
        return o
    ds = ctx.datasheet
    assert ds is not None
    rule: Thresholds
    if o.check in GEMM_CHECKS:
        peak, rule, what = ds.gemm_peak(o.check), GEMM, "dense peak"
        if peak is None:
            o.verdict, o.reason = Verdict.SKIPPED, f"{ds.model} has no {o.check[5:].upper()} tensor cores"
            return o
    elif o.check in ("mem_copy", "mem_triad"):
        peak, rule, what = ds.memory_gb_s, MEMORY, "memory bandwidth"
    elif o.check in ("h2d", "d2h"):
        gen, width = _link_peak(ds, ctx)
        peak, rule, what = ds.pcie_gb_s(gen, width), HOST_LINK, f"PCIe Gen{gen} x{width}"
    elif o.check == "p2p":
        if peer is not None and (peer.mig or (peer.vgpu and peer.datasheet is None)):
            o.reason = peer.unscorable or "the peer is a slice"
            return o
        peak, what = _p2p_peak(ds, ctx, peer)
        rule = PEER
    else:
        o.reason = f"no datasheet rule for {o.check}"
        return o
    if not peak:
        o.reason = f"{ds.model}: datasheet has no figure for {o.check}"
        return o
    assert o.measured is not None
    if o.check in GEMM_CHECKS:
        rule = gemm_rule(ds.model, o.check).rule
    if ctx.vgpu:
        what += " (the whole card this vGPU time-slices)"
    o.datasheet = round(float(peak), 3)
    median_ratio = o.measured / float(peak)
    if median_ratio > IMPLAUSIBLE_RATIO:
        o.ratio = round(median_ratio, 3)
        o.reason = (f"{o.ratio:.0%} of {ds.model} {what}: above what the card can do "
                    "(wrong model detected, or a timing error)")
        return o
    sustained = _num(o.details.get("sustained_p10"))
    peak_window = _num(o.details.get("peak"))
    judged = sustained if sustained is not None else o.measured
    o.ratio = round(judged / float(peak), 3)
    o.verdict = rule.judge(o.ratio)
    if sustained is not None:
        o.reason = f"sustained {o.ratio:.0%} of {ds.model} {what}" + (
            f" (peak window {peak_window / float(peak):.0%})" if peak_window is not None else "")
    else:
        o.reason = f"{o.ratio:.0%} of {ds.model} {what}"
    throttle = _throttle_note(o.details)
    # Dense GEMM reaching the default power limit (sw_power_cap) is how a healthy 700 W SXM card
    # runs (the H200 capture: every tensor format under sw_power_cap); a provider's lowered limit
    # is the health check's power_limit finding. Other throttles that cut throughput never pass.
    cutting = _throttle_note(o.details, ignore=frozenset({"sw_power_cap"}))
    if cutting and o.verdict is Verdict.PASS and sustained is not None and peak_window \
            and sustained < 0.9 * peak_window:
        o.verdict = Verdict.WARN  # a throttle that cut sustained throughput is named, never passed
    if throttle and o.verdict in (Verdict.WARN, Verdict.FAIL):
        o.reason += f"; {throttle}"
    if ctx.vgpu and o.verdict is not Verdict.PASS:
        # A time-sliced vGPU shares the card with other VMs: a low figure may be their load.
        o.verdict = Verdict.INCONCLUSIVE
        o.reason += ("; a vGPU is a time slice of the whole card: below the pass line, other VMs' load "
                     "cannot be ruled out")
    return o


def checksum_words(summed: Mapping[str, object]) -> str:
    """A failed checksum (the runner's `checksum_check`) in words."""
    where = summed.get("first_wrong")
    return (f"{summed.get('wrong')} of {summed.get('sums')} checksums over every element "
            f"({summed.get('band')}-wide bands against float64) disagree"
            f"; {summed.get('nonfinite') or 0} elements not finite"
            + (f"; first at row {where[0]}, column {where[1]}" if isinstance(where, list) else ""))


def _score_stress(o: Outcome) -> Outcome:
    if o.measured is None:
        o.reason = "no mismatch count was reported"
        return o
    if o.measured > 0:
        o.verdict = Verdict.FAIL
        o.reason = (f"{int(o.measured)} elements differ from the first GEMM or are not finite "
                    "(the same product must repeat bit for bit)")
        ref = o.details.get("reference_answers")
        summed = o.details.get("reference_checksum")
        if o.details.get("reference_wrong") and isinstance(summed, dict) and (summed.get("wrong")
                                                                            or summed.get("nonfinite")):
            o.reason = ("wrong answers in the first product: " + checksum_words(summed)
                        + " (a unit wrong the same way every time matches itself)")
        elif o.details.get("reference_wrong") and isinstance(ref, dict):
            o.reason = (f"wrong answers: {ref.get('wrong')} of {ref.get('checked')} sampled elements of the "
                        "first product differ from float64 (a unit wrong the same way every time matches itself)")
        if o.harness == "cpu":
            o.reason += f" ({CPU_LABEL})"
        return o
    if o.harness == "cpu":
        o.reason = f"no mismatches; {CPU_LABEL}"
        return o
    telemetry = o.details.get("telemetry") or {}
    seen = set(telemetry.get("throttle_reasons_seen") or []) if isinstance(telemetry, dict) else set()
    bad = sorted(seen & {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"})
    found = o.details.get("tflops")
    rates: Mapping[str, Any] = found if isinstance(found, dict) else {}
    sustained, peak = _num(rates.get("sustained_p10")), _num(rates.get("peak"))
    rate = f"; sustained {sustained:,.0f} TFLOP/s (peak {peak:,.0f})" if sustained is not None and peak else ""
    if sustained is not None and peak and sustained < 0.75 * peak:
        o.verdict = Verdict.WARN
        o.reason = (f"no mismatches, but the sustained GEMM rate fell to {sustained / peak:.0%} of its peak"
                    + (f"; {_throttle_note(o.details)}" if bad else ""))
    elif bad:
        o.verdict = Verdict.WARN
        o.reason = "no mismatches, but the card throttled under load: " + ", ".join(bad) + rate
    else:
        o.verdict, o.reason = Verdict.PASS, "no mismatches" + rate
    return o


def _version(text: Any) -> tuple[int, int] | None:
    try:
        major, minor = str(text).split(".")[:2]
        return int(major), int(minor)
    except (ValueError, TypeError):
        return None


def _score_env(o: Outcome, facts: Mapping[str, Any], ctx: GpuContext | None,
               expected: Mapping[str, Any] | None) -> Outcome:
    v = Verdict
    check = o.check
    if check == "env.driver":
        driver, runtime = _version(facts.get("driver_cuda_version")), _version(facts.get("runtime_cuda_version"))
        if runtime is None:
            o.verdict, o.reason = v.SKIPPED, "no CUDA runtime on the host to compare with the driver"
        elif driver is None:
            o.reason = "the driver's CUDA version could not be read"
        elif runtime <= driver:
            o.verdict, o.reason = v.PASS, f"CUDA runtime {runtime[0]}.{runtime[1]} <= driver's {driver[0]}.{driver[1]}"
        elif runtime[0] == driver[0]:
            o.verdict = v.WARN
            o.reason = (f"CUDA runtime {runtime[0]}.{runtime[1]} is newer than the driver's {driver[0]}.{driver[1]}:"
                        " works only through minor-version compatibility (no PTX JIT); update the driver")
        else:
            o.verdict = v.FAIL
            o.reason = (f"CUDA runtime {runtime[0]}.{runtime[1]} needs a newer driver"
                        f" (driver supports {driver[0]}.{driver[1]})")
        return o
    if check == "env.ecc":
        mode = facts.get("ecc_mode")
        if _int(facts.get("uncorrected_volatile")):
            o.verdict = v.FAIL
            o.reason = f"{facts['uncorrected_volatile']} uncorrected ECC errors since the last reset"
        elif _int(facts.get("uncorrected_aggregate")):
            o.verdict = v.WARN
            o.reason = f"{facts['uncorrected_aggregate']} uncorrected ECC errors in the card's lifetime"
        elif mode is None:
            o.verdict, o.reason = v.SKIPPED, "ECC not supported or not reported"
        elif str(mode).lower() != "enabled" and (ctx is None or ctx.datasheet is None or ctx.datasheet.ecc):
            o.verdict, o.reason = v.WARN, f"ECC is {mode} on a card that has it"
        else:
            o.verdict, o.reason = v.PASS, f"ECC {mode}, no uncorrected errors"
        return o
    if check == "env.retired_pages":
        yes = {k: str(facts.get(k) or "").lower() in ("yes", "true", "1") for k in
               ("pending", "remapped_failure", "remapped_pending")}
        if yes["pending"] or yes["remapped_failure"]:
            o.verdict = v.FAIL
            o.reason = "page retirement pending (reset the GPU)" if yes["pending"] else "row remapping failed"
        elif yes["remapped_pending"] or _int(facts.get("double_bit")) or _int(facts.get("remapped_uncorrectable")):
            o.verdict, o.reason = v.WARN, "rows remapped or pages retired after uncorrectable errors"
        elif all(facts.get(k) is None for k in ("pending", "single_bit", "double_bit", "remapped_pending")):
            o.verdict, o.reason = v.SKIPPED, "not reported by this GPU"
        else:
            o.verdict, o.reason = v.PASS, "no retired pages or remapped rows pending"
        return o
    if check == "env.persistence":
        mode = facts.get("persistence_mode")
        if mode is None:
            o.verdict, o.reason = v.SKIPPED, "not reported"
        elif str(mode).lower() == "enabled":
            o.verdict, o.reason = v.PASS, "persistence mode on"
        else:
            o.verdict, o.reason = v.WARN, "persistence mode off: start nvidia-persistenced (or nvidia-smi -pm 1)"
        return o
    if check == "env.pcie":
        wc, wm = _int(facts.get("width_current")), _int(facts.get("width_max"))
        gc, gm = _int(facts.get("gen_current")), _int(facts.get("gen_max"))
        if wc is None or wm is None:
            o.verdict, o.reason = v.SKIPPED, "PCIe link not reported"
        elif wc < wm:
            o.verdict, o.reason = v.FAIL, f"PCIe link runs at x{wc} of x{wm}: reseat the card or check the slot"
        elif ctx is not None and ctx.datasheet is not None and not ctx.vgpu and (
                (gm is not None and gm < ctx.datasheet.pcie_gen) or wm < ctx.datasheet.pcie_width):
            # The slot's own maximum is not the card's: a Gen5 card in a Gen4 or x8 slot is capped.
            ds = ctx.datasheet
            o.verdict = v.WARN
            o.reason = (f"the slot allows Gen{gm} x{wm} of the card's Gen{ds.pcie_gen} x{ds.pcie_width} "
                        f"({ds.model} datasheet): host copies are capped")
        else:
            o.verdict = v.PASS
            o.reason = f"Gen{gc} x{wc} (max Gen{gm} x{wm})" + (
                "; a lower generation at idle is power saving (read again under load)"
                if gc is not None and gm is not None and gc < gm else "")
        return o
    if check == "env.pcie_load":
        gc, wc = _int(facts.get("gen_current")), _int(facts.get("width_current"))
        gm = ctx.link_gen_max if ctx is not None else None
        wm = ctx.link_width_max if ctx is not None else None
        if gc is None or gm is None:
            o.verdict, o.reason = v.SKIPPED, "PCIe link under load not reported"
        elif gc < gm or (wc is not None and wm is not None and wc < wm):
            o.verdict = v.WARN
            o.reason = f"under load the link ran at Gen{gc} x{wc} of Gen{gm} x{wm}: it trained low, not power saving"
        else:
            o.verdict, o.reason = v.PASS, f"Gen{gc} x{wc} under load"
        return o
    if check == "env.busy":
        if facts.get("processes") is None and facts.get("utilization_pct") is None:
            o.verdict, o.reason = v.SKIPPED, "processes and utilisation not reported"
        elif facts.get("busy"):
            o.verdict, o.reason = v.WARN, _busy_text(facts) + " before the run"
        else:
            o.verdict, o.reason = v.PASS, "no other compute processes"
        return o
    if check == "env.throttle_idle" and facts.get("busy"):
        o.reason = "read while other processes used the GPU: says nothing about idle"
        return o
    if check == "env.throttle_idle":
        reasons = set(facts.get("reasons") or [])
        hard = sorted(reasons & {"hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})
        soft = sorted(reasons & {"sw_thermal_slowdown", "sw_power_cap"})
        if facts.get("reasons") is None:
            o.verdict, o.reason = v.SKIPPED, "throttle reasons not reported"
        elif hard:
            o.verdict, o.reason = v.FAIL, "throttling while idle: " + ", ".join(hard)
        elif soft:
            o.verdict, o.reason = v.WARN, "throttling while idle: " + ", ".join(soft)
        else:
            o.verdict, o.reason = v.PASS, "no throttling at idle"
        return o
    if check == "env.nvlink":
        total, active = _int(facts.get("links_total")) or 0, _int(facts.get("links_active")) or 0
        if total == 0:
            o.verdict, o.reason = v.SKIPPED, "no NVLink on this GPU"
        elif active < total:
            o.verdict, o.reason = v.WARN, f"{active} of {total} NVLink links up"
        else:
            o.verdict, o.reason = v.PASS, f"{active} NVLink links up"
        return o
    if check == "env.topology":
        return _score_topology(o, facts, expected)
    o.reason = f"no rule for {check}"
    return o


def _score_topology(o: Outcome, facts: Mapping[str, Any], expected: Mapping[str, Any] | None) -> Outcome:
    want = dict(expected or facts.get("expected") or {})
    count = _int(facts.get("gpu_count"))
    problems = []
    if want.get("gpu_count") is not None and count != _int(want["gpu_count"]):
        problems.append(f"{count} GPU(s), profile expects {want['gpu_count']}")
    if want.get("mig_mode") is not None:
        modes = {str(m or "N/A").lower() for m in facts.get("mig_modes") or []}
        if modes != {str(want["mig_mode"]).lower()}:
            problems.append(f"MIG mode {sorted(modes)}, profile expects {want['mig_mode']}")
    if want.get("model"):
        models = {detect_model(str(n)) for n in facts.get("names") or []}
        if models != {want["model"]}:
            problems.append(f"model {sorted(str(m) for m in models)}, profile expects {want['model']}")
    if problems:
        o.verdict, o.reason = Verdict.FAIL, "; ".join(problems)
    else:
        o.verdict = Verdict.PASS
        o.reason = f"{count} GPU(s)" + (" as expected" if want else " (no expected profile given)")
    return o


def overall(outcomes: Iterable[Outcome]) -> Verdict:
    """Fail beats inconclusive beats warn beats pass; skipped lines do not count."""
    seen = {o.verdict for o in outcomes}
    for verdict in (Verdict.FAIL, Verdict.INCONCLUSIVE, Verdict.WARN, Verdict.PASS):
        if verdict in seen:
            return verdict
    return Verdict.INCONCLUSIVE  # nothing ran at all


def score_run(summary: Mapping[str, Any], results: Sequence[Mapping[str, Any]],
              expected: Mapping[str, Any] | None = None) -> list[Outcome]:
    """Score every result of a run; a run without a summary or results is one inconclusive line."""
    contexts = gpu_contexts(summary, results)
    outcomes = [score_result(r, contexts, expected) for r in results]
    if summary.get("error"):
        outcomes.append(Outcome("run", None, Verdict.INCONCLUSIVE, f"runner error: {summary['error']}"))
    elif not outcomes:
        outcomes.append(Outcome("run", None, Verdict.INCONCLUSIVE, "the runner reported no results"))
    return outcomes
