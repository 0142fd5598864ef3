"""How verdicts and checks read on screen: colours for light and dark palettes, names, figures.

Every verdict has its own colour *and* its own glyph and word, so it never depends on colour
alone. Inconclusive is blue, deliberately unlike pass: something could not run, which is not good.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette

from gpuws.core.bench.verdicts import Outcome, Verdict
from gpuws.ui import theme

# (on a light base, on a dark base); the light ones keep 4.5:1 contrast on a tinted fill.
_COLOURS: dict[Verdict, tuple[str, str]] = {
    Verdict.PASS: ("#1e7e34", "#5bd27a"),
    Verdict.WARN: ("#a35f00", "#f2b53c"),
    Verdict.FAIL: ("#c5221f", "#ff6b63"),
    Verdict.INCONCLUSIVE: ("#1a5fc8", "#8ab4f8"),
    Verdict.SKIPPED: ("#6b7075", "#9aa0a6"),
}
_GLYPHS: dict[Verdict, str] = {
    Verdict.PASS: "\u2713",  # check mark
    Verdict.WARN: "!",
    Verdict.FAIL: "\u2715",  # multiplication x
    Verdict.INCONCLUSIVE: "?",
    Verdict.SKIPPED: "\u2013",  # en dash
}

CHECK_NAMES: dict[str, str] = {
    "gemm_fp32": "GEMM FP32",
    "gemm_tf32": "GEMM TF32",
    "gemm_fp16": "GEMM FP16",
    "gemm_bf16": "GEMM BF16",
    "gemm_fp8": "GEMM FP8",
    "mem_copy": "Memory copy",
    "mem_triad": "Memory triad",
    "h2d": "Host \u2192 device",
    "d2h": "Device \u2192 host",
    "p2p": "Peer to peer",
    "scaling": "Multi-GPU scaling",
    "stress": "Stress + correctness",
    "toolchain": "Toolchain",
    "timeout": "Time limit",
    "run": "Run",
    "env.driver": "Driver / CUDA runtime",
    "env.ecc": "ECC",
    "env.retired_pages": "Retired pages / rows",
    "env.persistence": "Persistence mode",
    "env.pcie": "PCIe link",
    "env.pcie_load": "PCIe link under load",
    "env.throttle_idle": "Throttling at idle",
    "env.nvlink": "NVLink",
    "env.topology": "GPU count / MIG",
}


def verdict_colour(verdict: Verdict, palette: QPalette | None = None) -> QColor:
    """The verdict's colour for the given (or application) palette."""
    light, dark = _COLOURS[verdict]
    return QColor(dark if theme.is_dark(palette) else light)


def verdict_text(verdict: Verdict) -> str:
    """'✓ PASS', '? INCONCLUSIVE' ..."""
    return f"{_GLYPHS[verdict]} {verdict.value.upper()}"


def check_name(check: str) -> str:
    """The display name of a check ("health.remapped_rows" -> "Health: Remapped memory rows")."""
    if check.startswith("health."):
        from gpuws.core.health.names import check_name as health_check_name

        return "Health: " + health_check_name(check[len("health."):])
    return CHECK_NAMES.get(check, check)


def where_text(outcome: Outcome) -> str:
    """'0', '0 → 1' for a peer copy, '' for host-wide checks."""
    if outcome.gpu is None:
        return ""
    if outcome.peer is not None:
        return f"{outcome.gpu} \u2192 {outcome.peer}"
    return str(outcome.gpu)


def figure_text(value: float | None, unit: str | None) -> str:
    """A measured or datasheet figure with its unit; an em dash when there is none."""
    if value is None:
        return "\u2014"
    if unit == "efficiency":
        return f"{value:.0%} efficiency"
    if unit == "mismatches":
        return f"{value:,.0f} mismatches"
    if abs(value) >= 100:
        number = f"{value:,.0f}"
    elif abs(value) >= 10:
        number = f"{value:.1f}"
    else:
        number = f"{value:.2f}"
    return f"{number} {unit}" if unit else number


def ratio_text(ratio: float | None) -> str:
    return "\u2014" if ratio is None else f"{ratio * 100:.0f} %"
