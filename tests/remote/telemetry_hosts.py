"""Test hosts for telemetry: an `nvidia-smi` that replays a real capture, and a python3 with the fake NVML."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.support.real_fixtures import REAL_FIXTURES
from tests.support.sshd import SshdServer, install_sim_nvidia_smi

REPO = Path(__file__).resolve().parents[2]
CAPTURES = REAL_FIXTURES / "nvidia-smi-captures"

# Replays the `--query-gpu` rows of a real capture (idle row, then load row, alternating) for any
# requested subset of its fields, as nvidia-smi does with --format=csv,noheader,nounits [-lms N].
_REPLAY = r'''#!{python}
import re, sys, time
CAPTURE = {capture!r}
ALIASES = {{"clocks_throttle_reasons.": "clocks_event_reasons."}}
lines = open(CAPTURE, encoding="utf-8").read().splitlines()
rows = []
for i, line in enumerate(lines):
    if line.startswith("# $ nvidia-smi --query-gpu="):
        header = [c.strip() for c in lines[i + 2].split(",")]
        values = [c.strip() for c in lines[i + 3].split(",")]
        rows.append((header, values))
args = sys.argv[1:]
query = next((a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")), None)
if query is None:
    print("replay: only --query-gpu is captured", file=sys.stderr)
    sys.exit(6)
fmt = next((a.split("=", 1)[1] for a in args if a.startswith("--format=")), "csv")
nounits = "nounits" in fmt
def render(header, values, field):
    names = [re.sub(r"\s*\[[^\]]*\]$", "", h) for h in header]
    key = field
    for old, new in ALIASES.items():
        if key.startswith(old):
            key = new + key[len(old):]
    if key not in names:
        print('Field "%s" is not a valid field to query.' % field)
        sys.exit(2)
    j = names.index(key)
    value = values[j]
    unit = re.search(r"\[([^\]]*)\]$", header[j])
    if nounits and unit and value.endswith(" " + unit.group(1)):
        value = value[: -len(unit.group(1)) - 1]
    return value
fields = query.split(",")
period = None
if "-lms" in args:
    period = int(args[args.index("-lms") + 1]) / 1000.0
n = 0
while True:
    header, values = rows[n % len(rows)]
    print(", ".join(render(header, values, f) for f in fields), flush=True)
    n += 1
    if period is None:
        break
    time.sleep(period)
'''


def install_replay_nvidia_smi(bin_dir: Path, capture: str) -> Path:
    """Write `bin_dir/nvidia-smi` replaying `capture` (a file name in the shared captures)."""
    path = CAPTURES / capture
    if not path.is_file():
        raise FileNotFoundError(f"fixture missing: {path}")
    bin_dir.mkdir(parents=True, exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(_REPLAY.format(python=sys.executable, capture=str(path)))
    smi.chmod(0o755)
    return smi


def install_nvml_python3(bin_dir: Path) -> Path:
    """Write `bin_dir/python3`: a python whose `import pynvml` is the simulated host's fake NVML."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    py = bin_dir / "python3"
    fake = REPO / "gpuws" / "sim" / "fake_nvml"
    py.write_text(f'#!/bin/sh\nPYTHONPATH="{fake}:{REPO}" exec "{sys.executable}" "$@"\n')
    py.chmod(0o755)
    return py


def start_sshd(server: SshdServer) -> SshdServer:
    """Start `server` and return it (for use in expressions)."""
    server.start()
    return server


def start_simulated_nvml_host(
    workdir: Path, *, gpus: str | None = None, clean_login: bool = False
) -> tuple[SshdServer, str]:
    """A real sshd whose host is the simulated GPU host with its fake NVML; returns it, started,
    and the path of the `python3` that sees that NVML (pass it by path: root's shell start-up on
    this machine puts pyenv's python3 first on PATH). `gpus`: a simulated GPU spec ("8xh100")."""
    bin_dir = workdir / "bin"
    install_sim_nvidia_smi(bin_dir)
    python = str(install_nvml_python3(bin_dir))
    state = workdir / "state"
    state.mkdir(parents=True, exist_ok=True)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "GPUWS_SIM_STATE": str(state)}
    if gpus is not None:
        env["GPUWS_SIM_GPUS"] = gpus
    server = SshdServer(workdir / "sshd", env=env, clean_login=clean_login)
    return start_sshd(server), python
