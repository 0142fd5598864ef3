"""`gpuws slices NAME` and `gpuws resize NAME TARGET`: MIG layouts and provider instance types.

Exit statuses of `resize` (the table of `gpuws --help`): 0 target verified, already there, or a
dry run; 2 refused input (bad target, no confirmation); 8 refused by preflight (busy GPU: nothing
changed); 9 failed but the previous layout was restored and verified; 10 the rollback failed too
(the message says what the host has now). The work itself is `gpuws.app.resize`, shared with the
window's Resize tab.

`resize NAME --recover` finishes an interrupted resize (the journal of `gpuws.core.resize.journal`)
with the same statuses.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuws.cli.connecting import ExitStatus, resize_exit_status, tty_prompts
from gpuws.cli.output import Subcommands, fail, print_json, sim_banner, whole_number
from gpuws.core.resize.audit import AuditLog
from gpuws.core.resize.journal import JournalEntry, ResizeJournal, interrupted_resize_json
from gpuws.core.resize.outcome import ResizeOutcome
from gpuws.core.resize.plan import Plan
from gpuws.core.resize.pricing import PriceBook, price_book
from gpuws.core.resize.provider import plan_provider_resize
from gpuws.core.resize.state import GpuMigState
from gpuws.core.resize.targets import target_options
from gpuws.core.stdin import read_answer
from gpuws.core.terminal import printable

if TYPE_CHECKING:
    from gpuws.app.cloud import InstanceResized
    from gpuws.app.resize import Progress

EXIT_OK, EXIT_REFUSED = ExitStatus.OK, ExitStatus.USAGE
# The one table's statuses for typed outcomes (used by --recover and `mig-parted apply`).
RESIZE_EXIT_STATUS: dict[ResizeOutcome, int] = {o: int(resize_exit_status(o)) for o in ResizeOutcome}
PROVIDER_PREFIX = "type:"


def register(sub: Subcommands) -> None:
    """Register `gpuws slices` and `gpuws resize`."""
    slices = sub.add_parser("slices", help="list the layouts each GPU of a host can be resized to (a cloud host "
                            "with --instance-type: its instance types, priced)")
    slices.add_argument("name", help="host profile name ('demo' for the built-in simulated host)")
    slices.add_argument("--json", action="store_true", help="print JSON")
    slices.add_argument("--accept-new", action="store_true", help="trust an unknown host key on first connect")
    slices.set_defaults(handler=_slices)

    resize = sub.add_parser(
        "resize",
        help="resize a GPU between MIG layouts and the full card, or change the instance type",
        description="TARGET: 'full', a MIG layout such as '7x1g.10gb' or '3g.40gb,3g.40gb', or "
        "'type:INSTANCE_TYPE' for the cloud provider (see `gpuws slices NAME`).",
    )
    resize.add_argument("name", help="host profile name ('demo' for the built-in simulated host)")
    resize.add_argument("target", nargs="?", help="'full', a MIG layout like 7x1g.10gb, or type:INSTANCE_TYPE")
    resize.add_argument("--recover", action="store_true",
                        help="finish an interrupted resize of this host: complete its target or restore "
                        "the previous layout, then verify (exit 0 verified, 8 refused, 9 rolled back, "
                        "10 rollback failed)")
    resize.add_argument("--gpu", type=whole_number, default=0, metavar="I", help="GPU index (default 0)")
    resize.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    resize.add_argument("--yes", action="store_true", help="do not ask for the typed confirmation")
    resize.add_argument("--stop-processes", action="store_true",
                        help="stop the compute processes on the GPU instead of refusing")
    resize.add_argument("--json", action="store_true", help="print JSON")
    resize.add_argument("--accept-new", action="store_true", help="trust an unknown host key on first connect")
    resize.set_defaults(handler=_resize)


# -- slices -------------------------------------------------------------------------------------


def _slices(args: argparse.Namespace) -> int:
    return asyncio.run(_slices_async(args))


def slice_rows(state: GpuMigState, prices: PriceBook) -> list[dict[str, Any]]:
    """The valid targets of one GPU with memory, compute share and price per hour (JSON rows)."""
    rows: list[dict[str, Any]] = []
    for option in target_options(state, prices):
        share = option.figures.compute_share
        row: dict[str, Any] = {
            "target": option.target,
            "kind": option.kind,
            "memory_gib": option.figures.memory_gib,
            "compute_share": round(float(share), 4) if share is not None else None,
            "price_per_hour": option.figures.price_per_hour,
            "current": option.current,
        }
        if option.note:
            row["note"] = option.note
        rows.append(row)
    return rows


async def _slices_async(args: argparse.Namespace) -> int:
    from gpuws.app.cloud_slices import cloud_family_of
    from gpuws.app.resize import read_gpus
    from gpuws.app.targets import open_target

    cloud = cloud_family_of(args.name)  # a cloud host: its instance-type family, no connection
    if cloud is not None:
        from gpuws.cli.commands.cloud_slices import print_cloud_slices

        print_cloud_slices(*cloud, as_json=args.json)
        return EXIT_OK
    async with open_target(args.name, accept_new=args.accept_new, **tty_prompts()) as conn:
        gpus = await read_gpus(conn.runner)
        profile = conn.profile
    interrupted = ResizeJournal().interrupted(args.name)
    doc: list[dict[str, Any]] = []
    for state in gpus:
        prices = price_book(profile, state.model, len(gpus))
        model = state.model
        doc.append({"gpu": state.index, "name": state.name, "current": state.layout.describe(),
                    "price_source": prices.source, "targets": slice_rows(state, prices),
                    # "driver": figures the driver reports (this host's own `mig -lgip` when MIG is
                    # on); "nominal": the sizes in the profile names (no capture for this model).
                    "memory_source": str(model.memory_source) if model else None})
    if args.json:
        print_json({"host": args.name, "simulated": profile.simulated, "gpus": doc,
                    "interrupted_resize": interrupted_resize_json(interrupted)})
        return EXIT_OK
    banner = sim_banner(profile.simulated)
    if interrupted is not None:
        print(f"warning: {interrupted.summary()}; run `gpuws resize {args.name} --recover`")
    for gpu in doc:
        nominal = "; memory sizes nominal" if gpu["memory_source"] == "nominal" else ""
        print(f"{banner}GPU {gpu['gpu']}: {gpu['name']} (now: {gpu['current']}; prices: {gpu['price_source']}"
              f"{nominal})")
        for row in gpu["targets"]:
            mark = "*" if row["current"] else " "
            mem = f"{row['memory_gib']:.1f} GiB" if row["memory_gib"] is not None else "-"
            share = f"{row['compute_share']:>6.1%}" if row["compute_share"] is not None else "     -"
            print(f"  {mark} {row['target']:<24} {mem:>11}  compute {share}  "
                  f"{_money(row['price_per_hour'])}/h" + (f"  ({row['note']})" if row.get("note") else ""))
    return EXIT_OK


def _money(value: float | None) -> str:
    return "$?" if value is None else f"${value:,.2f}"


# -- resize -------------------------------------------------------------------------------------


def _resize(args: argparse.Namespace) -> int:
    if args.recover:
        if args.target:
            return fail("--recover takes no TARGET: it finishes the interrupted resize", 2)
        return _recover(args)
    if not args.target:
        return fail("give a TARGET ('full', a MIG layout like 7x1g.10gb, or type:INSTANCE_TYPE), or --recover", 2)
    # LayoutError (2) and ResizeRefused (8) go up to the exit-status table in gpuws.cli.main.
    if args.target.startswith(PROVIDER_PREFIX):
        return asyncio.run(_provider_resize(args))
    return asyncio.run(_mig_resize(args))


def _confirm(args: argparse.Namespace, what: str) -> bool:
    """Destructive plans need --yes, or the host name typed on a terminal."""
    if args.yes:
        return True
    if not sys.stdin.isatty():
        print(f"gpuws: refusing: {what} is destructive; pass --yes (not a terminal, cannot ask)", file=sys.stderr)
        return False
    print(f"{what} is destructive. Type the host name ({args.name}) to continue: ", end="", file=sys.stderr, flush=True)
    return bool(read_answer(sys.stdin).strip() == args.name)


def _print_plan(banner: str, header: str, prices: tuple[float | None, float | None], plan: Plan) -> None:
    before, after = prices
    diff = f" ({after - before:+,.2f})" if before is not None and after is not None else ""
    print(f"{banner}{header}")
    print(f"price/h: {_money(before)} -> {_money(after)}{diff}")
    if plan.empty:
        print("plan: nothing to do (already at target)")
        return
    print(f"plan ({len(plan.steps)} steps{', destructive' if plan.destructive else ''}):")
    for number, step in enumerate(plan.steps, start=1):
        flag = "  [destructive]" if step.destructive else ""
        print(f"  {number}. {step.description}{flag}\n     $ {step.command}")


async def _mig_resize(args: argparse.Namespace) -> int:
    from gpuws.app.resize import plan_mig, read_gpus
    from gpuws.app.targets import open_host

    async with open_host(args.name, accept_new=args.accept_new, probe=False, **tty_prompts()) as (workspace, record):
        conn = record.connection
        assert conn is not None  # open_host yields a connected host
        profile = record.profile
        gpus = await read_gpus(conn.runner)
        state, model, plan = await plan_mig(conn.runner, args.gpu, args.target)
        prices = price_book(profile, model, len(gpus))
        price_pair = (prices.layout_price(plan.before, model), prices.layout_price(plan.after, model))
        banner = sim_banner(profile.simulated)
        header = f"{args.name} GPU {state.index} ({state.name}): {plan.before.describe()} -> {plan.after.describe()}"
        doc: dict[str, Any] = {
            "host": args.name, "gpu": state.index, "simulated": profile.simulated, "backend": "mig",
            "plan": plan.to_dict(), "before": plan.before.describe(), "after": plan.after.describe(),
            "price_per_hour": {"before": price_pair[0], "after": price_pair[1], "source": prices.source},
        }
        if args.dry_run or plan.empty:
            doc["outcome"] = "dry run: nothing changed" if args.dry_run and not plan.empty else "already at target"
            _emit(args, doc, lambda: _print_plan(banner, header, price_pair, plan))
            if plan.empty and not args.dry_run:  # audited like every resize, by the one service (nothing runs)
                await workspace.resize(args.name, plan, stop_processes=False, target_text=args.target)
            return EXIT_OK
        if not args.json:
            _print_plan(banner, header, price_pair, plan)
        if plan.destructive and not _confirm(args, f"resizing GPU {state.index} of {args.name}"):
            return EXIT_REFUSED

        # Re-plan check, run, verify or roll back, audit, profile slice and price: one service.
        applied = await workspace.resize(args.name, plan, stop_processes=args.stop_processes,
                                         progress=progress_printer(args.json), target_text=args.target)
    result = applied.result
    doc.update(result.to_dict())
    doc["after"] = result.after.describe() if result.after else None
    doc["price_per_hour"]["after"] = applied.price_after
    if applied.warnings:
        doc["warnings"] = [*doc.get("warnings", []), *applied.warnings]
    _emit(args, doc, lambda: _print_outcome(banner, doc))
    return resize_exit_status(result.kind)


def _print_outcome(banner: str, doc: dict[str, Any]) -> None:
    for warning in doc.get("warnings", []):
        print(f"warning: {warning}")
    if doc.get("error"):
        print(f"error: {doc['error']}")
    print(f"{banner}outcome: {doc['outcome']}; GPU {doc['gpu']} is now {doc['after'] or 'unknown'}")


def _emit(args: argparse.Namespace, doc: dict[str, Any], human: Any) -> None:
    if args.json:
        print_json(doc)
    else:
        human()


# -- recover ------------------------------------------------------------------------------------


def _recover(args: argparse.Namespace) -> int:
    # ResizeRefused (8) and any other error go up to the exit-status table in gpuws.cli.main.
    return RESIZE_EXIT_STATUS[asyncio.run(_recover_async(args))]


async def _recover_async(args: argparse.Namespace) -> ResizeOutcome:
    from gpuws.app.resize import ResizeRefused
    from gpuws.app.targets import open_host

    journal = ResizeJournal()
    entry = journal.read(args.name)
    if entry is None:
        nothing = {"host": args.name, "outcome": "nothing to recover",
                   "outcome_kind": str(ResizeOutcome.ALREADY_AT_TARGET), "ok": True}
        _emit(args, nothing, lambda: print(f"{printable(args.name)}: no interrupted resize to recover"))
        return ResizeOutcome.ALREADY_AT_TARGET
    if journal.interrupted(args.name) is None:
        raise ResizeRefused(f"a resize of {args.name} is still running (pid {entry.pid}); wait for it to finish")
    if entry.backend == "provider":
        return await _recover_instance(args, entry)
    if entry.gpu < 0:
        raise ResizeRefused(f"the resize journal {journal.path_for(args.name)} cannot be read; check the layout "
                            f"with `gpuws slices {args.name}` and remove that file")
    async with open_host(args.name, accept_new=args.accept_new, probe=False, **tty_prompts()) as (workspace, record):
        profile = record.profile
        banner = sim_banner(profile.simulated)
        if not args.json:
            then = "".join(f", then GPU {p['gpu']} -> {p['target']}" for p in entry.pending if isinstance(p, dict))
            print(f"{banner}{args.name} GPU {entry.gpu}: interrupted {entry.before} -> {entry.target}{then} "
                  f"(started {entry.started_at})")
            print(f"recover: complete {entry.target}, or restore {entry.before} if that fails")
        if not _confirm(args, f"recovering GPU {entry.gpu} of {args.name}"):
            raise ResizeRefused("recovery not confirmed; nothing changed")
        # Complete or restore, verify, then the after-verify step (journal, audit, profile): the
        # one implementation the window's Recover button runs too (gpuws.app.resize).
        run = await workspace.recover(args.name, entry, progress=progress_printer(args.json), audit=AuditLog(),
                                      stop_processes=args.stop_processes)
    first = run.results[entry.gpu]
    doc: dict[str, Any] = {"host": args.name, "gpu": entry.gpu, "simulated": profile.simulated, "backend": "mig",
                           "recovered": interrupted_resize_json(entry), **first.to_dict()}
    doc["before"] = entry.before
    doc["outcome_kind"] = str(run.kind)
    doc["gpus"] = [{"gpu": index, **result.to_dict()} for index, result in run.results.items()]
    doc["remaining"] = [p.to_dict() for p in run.remaining]
    if run.warnings:
        doc["warnings"] = [*doc.get("warnings", []), *run.warnings]

    def human() -> None:
        """The recovery's outcome in lines of text."""
        _print_outcome(banner, doc)
        for index, result in list(run.results.items())[1:]:
            now = result.after.describe() if result.after else "unknown"
            print(f"{banner}GPU {index}: {result.outcome}; now {now}")
        if run.remaining:
            left = ", ".join(f"GPU {p.gpu} -> {p.target}" for p in run.remaining)
            print(f"not done (an earlier GPU failed): {left}")

    _emit(args, doc, human)
    return run.kind


async def _recover_instance(args: argparse.Namespace, entry: JournalEntry) -> ResizeOutcome:
    """`--recover` of an interrupted instance type change: complete it, or the previous type back."""
    from gpuws.app.targets import host_workspace

    async with host_workspace(args.name) as workspace:
        record = workspace.host(args.name)
        assert record is not None
        price_before = record.profile.price_per_hour
        if not args.json:
            print(f"{args.name}: interrupted instance type change {entry.before} -> {entry.target} "
                  f"(started {entry.started_at})")
            print(f"recover: complete {entry.target}, or restore {entry.before} if that fails")
        if not _confirm(args, f"recovering the instance type change of {args.name} (it may be stopped)"):
            from gpuws.app.resize import ResizeRefused

            raise ResizeRefused("recovery not confirmed; nothing changed")
        done = await workspace.recover_instance(
            args.name, entry, progress=progress_printer(args.json),
            connection_options={"accept_new": args.accept_new, **tty_prompts()})
    doc: dict[str, object] = {"host": args.name, "backend": "provider", "recovered": interrupted_resize_json(entry)}
    _provider_outcome(args, doc, done, price_before)
    return done.kind


def progress_printer(quiet: bool) -> Callable[[Progress], None]:
    """The progress lines of a resize on stderr (none with --json)."""

    def progress(p: Progress) -> None:
        """Print one progress report."""
        if not quiet:
            count = f"[{p.done}/{p.total}] " if p.total else ""
            print(f"  {p.phase}: {count}{p.message}", file=sys.stderr, flush=True)

    return progress


# -- provider -----------------------------------------------------------------------------------


async def _provider_resize(args: argparse.Namespace) -> int:
    from gpuws.app.providers import provider_token
    from gpuws.app.targets import host_workspace

    async with host_workspace(args.name) as workspace:
        record = workspace.host(args.name)
        assert record is not None
        profile = record.profile
        plan = plan_provider_resize(profile.provider, args.target[len(PROVIDER_PREFIX):])
        doc: dict[str, object] = {"host": args.name, "backend": "provider", "plan": plan.to_dict(),
                                  "before": profile.slice_profile, "after": plan.instance_type,
                                  "price_per_hour": {"before": profile.price_per_hour, "after": None}}

        def show() -> None:
            """Print the provider plan, step by step."""
            print(f"{args.name}: change the instance type to {plan.instance_type} via {plan.kind}")
            for number, step in enumerate(plan.to_dict()["steps"], start=1):
                print(f"  {number}. {step['action']}\n     $ {step['command']}")

        if args.dry_run:
            doc["outcome"] = "dry run: nothing changed"
            _emit(args, doc, show)
            return EXIT_OK
        if not args.json:
            show()
        if not _confirm(args, f"changing the instance type of {args.name} (it will be stopped)"):
            return EXIT_REFUSED
        if provider_token(args.name) is None:
            print("note: no provider token in the keyring; the provider CLI uses its own configuration",
                  file=sys.stderr)
        # Stop, modify, start, the address read back, SSH, probe, the GPU checked against the type,
        # or the previous type back: the one implementation the window's Resize tab runs too.
        done = await workspace.resize_instance(
            args.name, args.target, progress=progress_printer(args.json),
            connection_options={"accept_new": args.accept_new, **tty_prompts()})
    return _provider_outcome(args, doc, done, profile.price_per_hour)


def _provider_outcome(args: argparse.Namespace, doc: dict[str, object], done: InstanceResized,
                      price_before: float | None) -> int:
    """Print a type change's (or its recovery's) outcome; its exit status."""
    doc.update(done.to_dict())
    doc["price_per_hour"] = {"before": price_before, "after": done.profile.price_per_hour if done.ok else None}

    def human() -> None:
        """The type change's outcome in lines of text."""
        for warning in done.warnings:
            print(f"warning: {warning}")
        if done.error:
            print(f"error: {done.error}")
        moved = (f"; address {done.address_before} -> {done.address_after}"
                 if done.address_after and done.address_after != done.address_before else "")
        seen = f"; GPU: {done.gpu_seen}" if done.gpu_seen else ""
        print(f"outcome: {done.outcome}; the instance is now {done.after or 'unknown'}{moved}{seen}")

    _emit(args, doc, human)
    return resize_exit_status(done.kind)
