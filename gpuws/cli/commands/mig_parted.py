"""`gpuws mig-parted export|apply|assert`: NVIDIA mig-parted v1 configs, applied as mig-parted does.

    gpuws mig-parted export NAME [--gpu I] [--config CFG]
    gpuws mig-parted apply NAME FILE --config CFG [--dry-run] [--yes] [--stop-processes] [--json]
    gpuws mig-parted assert NAME FILE --config CFG [--json]

`apply` selects GPUs as mig-parted does (`devices`, `device-filter` by PCI device id, the last
matching entry wins) and resizes each through plan -> preflight -> apply -> verify -> rollback.
Exit statuses: 0 done (or nothing to do, or a dry run), 8 refused before anything changed, 9 a GPU
failed and was rolled back, 10 its rollback failed too. `assert` exits 0 when the host matches the
config and 1 with the differences when it does not (as `nvidia-mig-parted assert`).
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from gpuws.cli.commands.resize import RESIZE_EXIT_STATUS
from gpuws.cli.connecting import ExitStatus, tty_prompts
from gpuws.cli.output import Subcommands, fail, print_json, sim_banner, whole_number
from gpuws.core.errors import GpuwsError, ParseError, RefusedInput
from gpuws.core.resize.layout import LayoutError
from gpuws.core.resize.migparted import (
    GpuAction,
    MigPartedEntry,
    assert_differences,
    config_targets,
    export_mig_parted,
)
from gpuws.core.resize.outcome import ResizeOutcome
from gpuws.core.terminal import printable

EXIT_ASSERT_DIFFERS = 1
_REFUSED = RESIZE_EXIT_STATUS[ResizeOutcome.REFUSED]


def register(sub: Subcommands) -> None:
    """Register `gpuws mig-parted` and its subcommands."""
    group = sub.add_parser("mig-parted", help="export, apply and assert NVIDIA mig-parted v1 MIG configs",
                           description=__doc__.split("\n\n")[0] if __doc__ else None)
    cmds = group.add_subparsers(dest="mig_parted_command", metavar="SUBCOMMAND")

    export = cmds.add_parser("export", help="print the host's current MIG layout as a mig-parted v1 config")
    export.add_argument("name", help="host profile name ('demo' for the built-in simulated host)")
    export.add_argument("--gpu", type=whole_number, metavar="I", help="only this GPU (default: every MIG-capable GPU)")
    export.add_argument("--config", default="current", metavar="CFG", help="name of the config (default: current)")
    export.add_argument("--accept-new", action="store_true", help="trust an unknown host key on first connect")
    export.set_defaults(handler=_export)

    for verb, text in (("apply", "apply a named config of a mig-parted file to every GPU it selects"),
                       ("assert", "exit 0 when the host matches a named config, 1 with the differences")):
        cmd = cmds.add_parser(verb, help=text)
        cmd.add_argument("name", help="host profile name ('demo' for the built-in simulated host)")
        cmd.add_argument("file", type=Path, help="mig-parted v1 YAML file (e.g. NVIDIA's config-default.yaml)")
        cmd.add_argument("--config", "-c", required=True, metavar="CFG", help="the named config to use")
        cmd.add_argument("--json", action="store_true", help="print JSON")
        cmd.add_argument("--accept-new", action="store_true", help="trust an unknown host key on first connect")
        if verb == "apply":
            cmd.add_argument("--dry-run", action="store_true", help="print the plans and change nothing")
            cmd.add_argument("--yes", action="store_true", help="do not ask for the typed confirmation")
            cmd.add_argument("--stop-processes", action="store_true",
                             help="stop compute processes on the GPUs instead of refusing")
            cmd.set_defaults(handler=_apply)
        else:
            cmd.set_defaults(handler=_assert)


def load_config(path: Path, config: str) -> list[MigPartedEntry]:
    """The entries of named config `config` in the mig-parted file at `path`; the file is the user's
    input, so anything wrong with it (unreadable, not mig-parted, no such config) is RefusedInput."""
    from gpuws.app.resize import read_mig_parted_configs

    configs = read_mig_parted_configs(path)
    if config not in configs:
        shown = ", ".join(printable(name, 40) for name in list(configs)[:12]) + (", ..." if len(configs) > 12 else "")
        raise RefusedInput(f"{printable(str(path))} has no config named '{printable(config, 60)}' "
                           f"(it has {len(configs)}: {shown})")
    return configs[config]


def _export(args: argparse.Namespace) -> int:
    return asyncio.run(_export_async(args))  # errors go to the one exit-status table in cli/main.py


async def _export_async(args: argparse.Namespace) -> int:
    from gpuws.app.resize import read_gpus
    from gpuws.app.targets import open_target

    async with open_target(args.name, accept_new=args.accept_new, **tty_prompts()) as conn:
        gpus = await read_gpus(conn.runner)
    chosen = [g for g in gpus if g.mig_capable and (args.gpu is None or g.index == args.gpu)]
    if args.gpu is not None and not chosen:
        return fail(f"{args.name} has no MIG-capable GPU {args.gpu}", ExitStatus.USAGE)
    print(export_mig_parted({g.index: g.layout for g in chosen}, args.config), end="")
    return 0


def _apply(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_apply_async(args))
    except (LayoutError, ParseError) as exc:
        return fail(str(exc), _REFUSED)
    except GpuwsError as exc:
        from gpuws.app.resize import ResizeRefused

        if isinstance(exc, ResizeRefused):
            return fail(str(exc), _REFUSED)
        raise


async def _apply_async(args: argparse.Namespace) -> int:
    from gpuws.app.resize import config_result_json, plan_mig, read_host_gpus
    from gpuws.app.targets import open_host
    from gpuws.cli.commands.resize import _confirm, progress_printer

    entries = load_config(args.file, args.config)  # a bad file is refused before connecting
    async with open_host(args.name, accept_new=args.accept_new, probe=False, **tty_prompts()) as (workspace, record):
        conn = record.connection
        assert conn is not None  # open_host yields a connected host
        profile = record.profile
        targets = config_targets(args.config, entries, await read_host_gpus(conn.runner))
        banner = sim_banner(profile.simulated)
        plans = {t.gpu.index: (await plan_mig(conn.runner, t.gpu.index, t.target))[2]
                 for t in targets if t.action is GpuAction.CHANGE and t.target is not None}
        doc: dict[str, Any] = {"host": args.name, "simulated": profile.simulated, "file": str(args.file),
                               "config": args.config, "gpus": [t.to_dict() for t in targets],
                               "plans": {str(i): p.to_dict() for i, p in plans.items()}}
        if not args.json:
            print(f"{banner}{args.name}: mig-parted config {printable(args.config)!r} from {printable(str(args.file))}")
            for t in targets:
                wanted = t.target.describe() if t.target else "-"
                name = printable(t.gpu.name)
                print(f"  GPU {t.gpu.index} {name}: {t.gpu.layout.describe()} -> {wanted}  [{t.action}]"
                      + (f"  ({t.note})" if t.note else ""))
                if t.gpu.index in plans:
                    for number, step in enumerate(plans[t.gpu.index].steps, start=1):
                        print(f"      {number}. $ {step.command}")
        if args.dry_run or not plans:
            nothing = ResizeOutcome.DRY_RUN if args.dry_run and plans else ResizeOutcome.ALREADY_AT_TARGET
            doc["outcome_kind"] = str(nothing)
            doc["ok"] = True
            if args.json:
                print_json(doc)
            else:
                print("dry run: nothing changed" if args.dry_run and plans else "nothing to do: the host matches")
            return 0
        if not _confirm(args, f"applying {args.config!r} to GPU(s) {', '.join(map(str, plans))} of {args.name}"):
            return int(ExitStatus.USAGE)  # no confirmation: refused input, as for `gpuws resize`

        # Each GPU: plan, preflight, apply, verify (or roll back), then the after-verify step
        # (journal, audit, the profile's slice and price), exactly as `gpuws resize` does.
        run = await workspace.apply_mig_config(args.name, args.config, targets, stop_processes=args.stop_processes,
                                               progress=progress_printer(args.json))
    doc.update(config_result_json(args.config, targets, run))
    if run.warnings:
        doc["warnings"] = run.warnings
    if args.json:
        print_json(doc)
    else:
        for warning in run.warnings:
            print(f"warning: {warning}")
        for index, res in run.results.items():
            print(f"{banner}GPU {index}: {res.outcome}; now {res.after.describe() if res.after else 'unknown'}"
                  + (f"\n  error: {res.error}" if res.error else ""))
        if run.remaining:
            print("not done (an earlier GPU failed): " + ", ".join(f"GPU {p.gpu} -> {p.target}" for p in run.remaining))
    return RESIZE_EXIT_STATUS[run.kind]


def _assert(args: argparse.Namespace) -> int:
    # assert answers 0 (matches) or 1 (differs); a bad file or config is refused input (2) and a
    # failure on the host takes its status from the one table in cli/main.py.
    return asyncio.run(_assert_async(args))


async def _assert_async(args: argparse.Namespace) -> int:
    from gpuws.app.resize import read_host_gpus
    from gpuws.app.targets import open_target

    entries = load_config(args.file, args.config)
    async with open_target(args.name, accept_new=args.accept_new, **tty_prompts()) as conn:
        profile = conn.profile
        targets = config_targets(args.config, entries, await read_host_gpus(conn.runner))
    differences = assert_differences(targets)
    if args.json:
        print_json({"host": args.name, "simulated": profile.simulated, "config": args.config,
                    "matches": not differences, "differences": differences,
                    "gpus": [t.to_dict() for t in targets]})
    elif differences:
        print(f"{sim_banner(profile.simulated)}{args.name} does not match {args.config!r}:")
        for line in differences:
            print(f"  {line}")
    else:
        print(f"{sim_banner(profile.simulated)}{args.name} matches {args.config!r}")
    return EXIT_ASSERT_DIFFERS if differences else 0
