"""`python -m gpuws.sim.nvidia_smi ARGS`: the simulated `nvidia-smi` (console script
`gpuws-sim-nvidia-smi`), with its state in the directory `$GPUWS_SIM_STATE`.

Supported: `-L`, `-q -x`, `--query-gpu=... --format=csv[,noheader][,nounits]`,
`--query-compute-apps=...`, `-l SEC` / `-lms MS` streaming, `-i INDEX|UUID|BUS_ID[,...]`,
`-mig 0|1`, `-r`, `nvlink -e | -s`, the default table, and `mig -lgip | -lgipp | -lgi | -lci | -cgi LIST [-C] |
-cci | -dci | -dgi` (with `-gi` / `-ci`). Output formats, error texts and exit codes follow real
nvidia-smi (see `gpuws.sim.mig` for the exit codes).
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from gpuws.core.errors import GpuwsError
from gpuws.sim import mig
from gpuws.sim.dynamics import sample
from gpuws.sim.health import nvlink_text
from gpuws.sim.mig import EXIT_INVALID_ARGUMENT, EXIT_NOT_FOUND, Outcome
from gpuws.sim.smi_fields import (
    APP_FIELD_ALIASES,
    APP_FIELDS,
    GPU_FIELD_ALIASES,
    GPU_FIELDS,
    GpuContext,
    ProcessContext,
    format_value,
    header,
)
from gpuws.sim.smi_table import render_table
from gpuws.sim.smi_xml import render_xml
from gpuws.sim.state import GpuState, SimState, SimStateStore

INVALID_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."
NO_DEVICES = "No devices were found"
EXIT_OTHER = 255


class UsageError(Exception):
    """Bad command line; carries nvidia-smi's message."""


@dataclass
class Args:
    list_gpus: bool = False
    query: bool = False
    xml: bool = False
    query_gpu: str | None = None
    query_apps: str | None = None
    csv_format: str | None = None
    loop_s: float | None = None
    ids: str | None = None
    mig_mode: str | None = None
    reset: bool = False
    help: bool = False
    version: bool = False
    mig_cmd: str | None = None  # "lgip", "lgipp", "lgi", "lci", "cgi", "cci", "dci", "dgi"
    mig_profiles: str | None = None
    mig_with_ci: bool = False
    gi_ids: str | None = None
    ci_ids: str | None = None
    nvlink: str | None = None  # "e" (error counters) or "s" (status) of `nvidia-smi nvlink`
    extra: list[str] = field(default_factory=list)
    pmon: bool = False  # `nvidia-smi pmon`: per-process utilisation, one line per process
    pmon_count: int | None = None  # -c: samples before exiting (None: until stopped)
    pmon_delay_s: float = 1.0  # -d: seconds between samples


def _value(argv: list[str], i: int, opt: str) -> tuple[str, int]:
    """The value of option argv[i] (`--opt=V` or `--opt V`); returns it and the next index."""
    if "=" in argv[i] and argv[i].startswith("--"):
        return argv[i].split("=", 1)[1], i + 1
    if i + 1 >= len(argv):
        raise UsageError(f'Option "{opt}" is missing an argument.\n{INVALID_ARGS}')
    return argv[i + 1], i + 2


def parse_args(argv: Sequence[str]) -> Args:
    args = Args()
    items = list(argv)
    i = 0
    in_mig = False
    if items and items[0] == "mig":
        in_mig = True
        i = 1
    if items and items[0] == "nvlink":
        for a in items[1:]:
            if a in ("-e", "--errorcounters"):
                args.nvlink = "e"
            elif a in ("-s", "--status"):
                args.nvlink = "s"
            elif a.startswith("-i") or a.isdigit() or a.startswith("--id"):
                continue
            else:
                raise UsageError(INVALID_ARGS)
        if args.nvlink is None:
            raise UsageError(INVALID_ARGS)
        return args
    if items and items[0] == "pmon":
        return _parse_pmon(items[1:])
    while i < len(items):
        a = items[i]
        key = a.split("=", 1)[0] if a.startswith("--") else a
        if key in ("-h", "--help"):
            args.help, i = True, i + 1
        elif key == "--version":
            args.version, i = True, i + 1
        elif key in ("-i", "--id"):
            args.ids, i = _value(items, i, key)
        elif in_mig and key in ("-lgip", "--list-gpu-instance-profiles"):
            args.mig_cmd, i = "lgip", i + 1
        elif in_mig and key in ("-lgipp", "--list-gpu-instance-possible-placements"):
            args.mig_cmd, i = "lgipp", i + 1
        elif in_mig and key in ("-lgi", "--list-gpu-instances"):
            args.mig_cmd, i = "lgi", i + 1
        elif in_mig and key in ("-lci", "--list-compute-instances"):
            args.mig_cmd, i = "lci", i + 1
        elif in_mig and key in ("-cgi", "--create-gpu-instance"):
            args.mig_cmd = "cgi"
            args.mig_profiles, i = _value(items, i, key)
        elif in_mig and key in ("-C", "--default-compute-instance"):
            args.mig_with_ci, i = True, i + 1
        elif in_mig and key in ("-cci", "--create-compute-instance"):
            args.mig_cmd, i = "cci", i + 1
            if i < len(items) and not items[i].startswith("-"):
                i += 1  # an explicit CI profile list: only the whole-instance profile is simulated
        elif in_mig and key in ("-dci", "--destroy-compute-instance"):
            args.mig_cmd, i = "dci", i + 1
        elif in_mig and key in ("-dgi", "--destroy-gpu-instance"):
            args.mig_cmd, i = "dgi", i + 1
        elif in_mig and key in ("-gi", "--gpu-instance-id"):
            args.gi_ids, i = _value(items, i, key)
        elif in_mig and key in ("-ci", "--compute-instance-id"):
            args.ci_ids, i = _value(items, i, key)
        elif in_mig:
            raise UsageError(INVALID_ARGS)
        elif key in ("-L", "--list-gpus"):
            args.list_gpus, i = True, i + 1
        elif key in ("-q", "--query"):
            args.query, i = True, i + 1
        elif key in ("-x", "--xml-format"):
            args.xml, i = True, i + 1
        elif key == "-qx":
            args.query = args.xml = True
            i += 1
        elif key == "--query-gpu":
            args.query_gpu, i = _value(items, i, key)
        elif key == "--query-compute-apps":
            args.query_apps, i = _value(items, i, key)
        elif key == "--format":
            args.csv_format, i = _value(items, i, key)
        elif key in ("-l", "--loop"):
            text, i = _value(items, i, key)
            args.loop_s = _positive(text, key)
        elif key in ("-lms", "--loop-ms"):
            text, i = _value(items, i, key)
            args.loop_s = _positive(text, key) / 1000.0
        elif key in ("-mig", "--multi-instance-gpu"):
            args.mig_mode, i = _value(items, i, key)
            if args.mig_mode not in ("0", "1"):
                raise UsageError(INVALID_ARGS)
        elif key in ("-r", "--gpu-reset"):
            args.reset, i = True, i + 1
        else:
            raise UsageError(INVALID_ARGS)
    if (args.query_gpu or args.query_apps) and not (args.csv_format or "").startswith("csv"):
        raise UsageError('"--format" option must be specified with "--query-*" options.\n' + INVALID_ARGS)
    if args.xml and not args.query:
        raise UsageError(INVALID_ARGS)
    return args


def _parse_pmon(items: list[str]) -> Args:
    """`nvidia-smi pmon [-i ID] [-c COUNT] [-d DELAY] [-s u]`: only the utilisation metrics."""
    args = Args(pmon=True)
    i = 0
    while i < len(items):
        key = items[i]
        if key in ("-h", "--help"):
            args.help, i = True, i + 1
        elif key in ("-i", "--id"):
            args.ids, i = _value(items, i, key)
        elif key in ("-c", "--count"):
            text, i = _value(items, i, key)
            if not text.isdigit() or not 1 <= int(text) <= 10000:
                raise UsageError(INVALID_ARGS)
            args.pmon_count = int(text)
        elif key in ("-d", "--delay"):
            text, i = _value(items, i, key)
            args.pmon_delay_s = _positive(text, key)
        elif key in ("-s", "--select"):
            text, i = _value(items, i, key)
            if set(text) - {"u"}:  # m (memory), p, c, v, e, t are not simulated
                raise UsageError(f"The simulated nvidia-smi pmon supports only -s u.\n{INVALID_ARGS}")
        else:
            raise UsageError(INVALID_ARGS)
    return args


PMON_HEADER = (
    "# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command ",
    "# Idx           #    C/G      %      %      %      %      %      %    name ",
)


def render_pmon(gpus: list[GpuState], now: float) -> list[str]:
    """One `nvidia-smi pmon -s u` sample: a line per process, or a line of dashes for an idle GPU.

    SM and memory % are the GPU's busy share split by memory held (as the simulated NVML says);
    '-' on a MIG-enabled GPU, where the driver cannot tell per process.
    """
    lines = []
    for gpu in gpus:
        reading = sample(gpu, now)
        shares = reading.process_utilization()
        if not reading.processes:
            lines.append(f"{gpu.index:>5}{'-':>11}{'-':>6}" + f"{'-':>7}" * 6 + "    -")
        for proc in reading.processes:
            sm, mem = (str(v) for v in shares[proc.pid]) if proc.pid in shares else ("-", "-")
            command = proc.name.split()[0].rsplit("/", 1)[-1] if proc.name.strip() else "-"
            lines.append(f"{gpu.index:>5}{proc.pid:>11}{'C':>6}{sm:>7}{mem:>7}" + f"{'-':>7}" * 4 + f"    {command}")
    return lines


def _positive(text: str, opt: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f'Invalid value "{text}" for option "{opt}".\n{INVALID_ARGS}') from None
    if value <= 0:
        raise UsageError(f'Invalid value "{text}" for option "{opt}".\n{INVALID_ARGS}')
    return value


def select_gpus(state: SimState, ids: str | None) -> list[GpuState]:
    """GPUs named by `-i` (index, UUID or PCI bus id, comma separated); all when not given."""
    if ids is None:
        return list(state.gpus)
    chosen: list[GpuState] = []
    for raw in ids.split(","):
        ident = raw.strip()
        match = [
            g for g in state.gpus
            if ident in (str(g.index), g.uuid, g.pci_bus_id) or (len(ident) >= 8 and g.uuid.startswith(ident))
        ]
        if not match:
            raise LookupError(ident)
        chosen.extend(g for g in match if g not in chosen)
    return chosen


def _id_list(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(INVALID_ARGS) from None


def render_list(gpus: list[GpuState]) -> list[str]:
    """`nvidia-smi -L`, with MIG device lines as real drivers print them."""
    lines = []
    for gpu in gpus:
        lines.append(f"GPU {gpu.index}: {gpu.model.name} (UUID: {gpu.uuid})")
        if gpu.mig_current:
            for index, (gi, ci) in enumerate(mig.mig_devices(gpu)):
                profile = gpu.model.mig_profile(gi.profile_id)
                name = profile.name if profile else "?"
                lines.append(f"  MIG {name:<11} Device {index:2d}: (UUID: {ci.uuid})")
    return lines


def _csv_options(fmt: str) -> tuple[bool, bool]:
    parts = [p.strip() for p in fmt.split(",")]
    unknown = [p for p in parts[1:] if p not in ("noheader", "nounits")]
    if parts[0] != "csv" or unknown:
        raise UsageError(f'"{fmt}" is not a valid format.\n{INVALID_ARGS}')
    return "noheader" in parts, "nounits" in parts


def _resolve(names: str, fields: dict[str, object], aliases: dict[str, str]) -> list[str]:
    resolved = []
    for raw in names.split(","):
        name = raw.strip()
        canonical = aliases.get(name, name)
        if canonical not in fields:
            raise UsageError(f'Field "{name}" is not a valid field to query.\n')
        resolved.append(canonical)
    return resolved


def gpu_csv_rows(state: SimState, gpus: list[GpuState], names: list[str], nounits: bool, now: float) -> list[str]:
    rows = []
    for gpu in gpus:
        ctx = GpuContext(state, gpu, sample(gpu, now), now)
        rows.append(", ".join(
            format_value(GPU_FIELDS[n].get(ctx), GPU_FIELDS[n].unit, nounits) for n in names
        ))
    return rows


def app_csv_rows(state: SimState, gpus: list[GpuState], names: list[str], nounits: bool, now: float) -> list[str]:
    rows = []
    for gpu in gpus:
        for proc in sample(gpu, now).processes:
            ctx = ProcessContext(state, gpu, proc, now)
            rows.append(", ".join(
                format_value(APP_FIELDS[n].get(ctx), APP_FIELDS[n].unit, nounits) for n in names
            ))
    return rows


def _emit(lines: Sequence[str], stream: TextIO | None = None) -> None:
    out = sys.stdout if stream is None else stream
    for line in lines:
        print(line, file=out)
    out.flush()


def _run_mig(store: SimStateStore, args: Args) -> int:
    with store.update() as state:
        gpus = select_gpus(state, args.ids)
        gi_ids, ci_ids = _id_list(args.gi_ids), _id_list(args.ci_ids)
        actions: dict[str | None, Callable[[], Outcome]] = {
            "lgip": lambda: mig.list_gpu_instance_profiles(gpus),
            "lgipp": lambda: mig.list_gpu_instance_placements(gpus),
            "lgi": lambda: mig.list_gpu_instances(gpus),
            "lci": lambda: mig.list_compute_instances(gpus),
            "cgi": lambda: mig.create_gpu_instances(
                gpus, [p for p in (args.mig_profiles or "").split(",") if p.strip()], args.mig_with_ci
            ),
            "cci": lambda: mig.create_compute_instances(gpus, gi_ids),
            "dci": lambda: mig.destroy_compute_instances(gpus, gi_ids, ci_ids),
            "dgi": lambda: mig.destroy_gpu_instances(gpus, gi_ids),
        }
        action = actions.get(args.mig_cmd)
        if action is None:
            raise UsageError(INVALID_ARGS)
        outcome = action()
    _emit(outcome.stdout)
    _emit(outcome.stderr, sys.stderr)
    return outcome.code


def _loop(args: Args, render: Callable[[float, bool], list[str]]) -> int:
    """Print one sample now and, with -l/-lms, one per interval until stopped."""
    first = True
    while True:
        now = time.time()
        _emit(render(now, first))
        first = False
        if args.loop_s is None:
            return 0
        time.sleep(max(0.0, args.loop_s - (time.time() - now)))


def _run_pmon(store: SimStateStore, args: Args) -> int:
    _emit(PMON_HEADER)
    done = 0
    while True:
        state = store.load()  # processes and load change between samples
        _emit(render_pmon(select_gpus(state, args.ids), time.time()))
        done += 1
        if args.pmon_count is not None and done >= args.pmon_count:
            return 0
        time.sleep(args.pmon_delay_s)


def run(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if args.help:
        _emit(["NVIDIA System Management Interface -- simulated by gpuws (not real hardware)",
               "Usage: nvidia-smi [-L] [-q -x] [--query-gpu=... --format=csv] [-i ID] [mig ...]"])
        return 0
    store = SimStateStore.from_env()
    if args.version:
        state = store.load()
        _emit([f"NVSMI version    : {state.driver_version}", f"DRIVER version   : {state.driver_version}",
               f"CUDA Version     : {state.cuda_version}"])
        return 0
    if args.mig_cmd is not None:
        return _run_mig(store, args)
    if args.pmon:
        return _run_pmon(store, args)
    if args.mig_mode is not None or args.reset:
        with store.update() as state:
            gpus = select_gpus(state, args.ids)
            now = time.time()
            if args.mig_mode is not None:
                outcome = mig.set_mig_mode(gpus, args.mig_mode == "1", now)
            else:
                outcome = mig.reset_gpus(gpus, now)
        _emit(outcome.stdout)
        _emit(outcome.stderr, sys.stderr)
        return outcome.code

    state = store.load()
    gpus = select_gpus(state, args.ids)
    if args.nvlink is not None:
        _emit(nvlink_text(state, gpus, errors=args.nvlink == "e"))
        return 0
    if args.list_gpus:
        _emit(render_list(gpus))
        return 0
    if args.query_gpu or args.query_apps:
        noheader, nounits = _csv_options(args.csv_format or "csv")
        if args.query_gpu:
            names = _resolve(args.query_gpu, dict(GPU_FIELDS), GPU_FIELD_ALIASES)
            head = ", ".join(header(n, GPU_FIELDS[n].unit) for n in names)
            rows = gpu_csv_rows
        else:
            names = _resolve(args.query_apps or "", dict(APP_FIELDS), APP_FIELD_ALIASES)
            head = ", ".join(header(n, APP_FIELDS[n].unit) for n in names)
            rows = app_csv_rows

        def render_csv(now: float, first: bool) -> list[str]:
            # Load/processes change between samples: re-read the state each time.
            current = store.load() if not first else state
            selected = select_gpus(current, args.ids)
            body = rows(current, selected, names, nounits, now)
            return ([head] if first and not noheader else []) + body

        return _loop(args, render_csv)
    if args.query and not args.xml:
        raise UsageError("The simulated nvidia-smi supports -q only together with -x.")

    def render_current(now: float, first: bool) -> list[str]:
        current = state if first else store.load()
        selected = select_gpus(current, args.ids)
        if args.xml:
            return [render_xml(current, selected, now).rstrip("\n")]
        return render_table(current, selected, now)

    return _loop(args, render_current)


def console_main() -> int:
    """The `nvidia-smi` process entry point (console script and `python -m`)."""
    # Die quietly like a C program when the reader goes away (`| head`, a closed SSH channel).
    # Only in a process of its own: in a host process (tests call `main` in-process) this would
    # let any later broken pipe kill that whole process silently.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    return main()


def main(argv: Sequence[str] | None = None) -> int:
    """Run nvidia-smi with `argv`; returns nvidia-smi's exit code."""
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(str(exc).rstrip("\n"), file=sys.stderr)
        return EXIT_INVALID_ARGUMENT
    except LookupError:
        print(NO_DEVICES, file=sys.stderr)
        return EXIT_NOT_FOUND
    except GpuwsError as exc:
        print(f"nvidia-smi (gpuws simulation): {exc}", file=sys.stderr)
        return EXIT_OTHER
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(console_main())
