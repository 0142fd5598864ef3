"""The working session from a terminal: `gpuws tunnel`, `cost`, `cp`, `start`, `stop`."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import gc
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuws.cli.connecting import tty_prompts
from gpuws.cli.output import Subcommands, fail, print_json, whole_number
from gpuws.core.errors import ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpuws.app.files import CopyPlan, TransferProgress
    from gpuws.core.session import HostCost

PRESET_CHOICES = ("jupyter", "tensorboard", "vnc", "dcv", "novnc")


def register(sub: Subcommands) -> None:
    """Register `gpuws tunnel`, `cost`, `cp`, `start` and `stop`."""
    p = sub.add_parser(
        "tunnel",
        help="forward a local port to a service on the host (Jupyter, TensorBoard, VNC...)",
        description="Forward 127.0.0.1:LOCAL here to 127.0.0.1:REMOTE on the host of profile NAME, print the "
        "local URL, open it, and stay in the foreground until Ctrl-C. The tunnel comes back by itself after "
        "the SSH connection drops and reconnects.",
    )
    p.add_argument("name", metavar="NAME", help="host profile name ('demo': the built-in simulated host)")
    p.add_argument("--remote", type=whole_number, metavar="PORT", help="port of the service on the host "
                   "(default: the preset's; for jupyter, the running server's)")
    p.add_argument("--local", type=whole_number, metavar="PORT",
                   help="local port (default: the same as --remote if free, else any free port)")
    p.add_argument("--preset", choices=PRESET_CHOICES, help="what the service is: sets the usual port and URL")
    p.add_argument("--no-start", action="store_true", help="jupyter: do not start a server when none is running")
    p.add_argument("--logdir", metavar="DIR", help="tensorboard: start `tensorboard --logdir DIR` on the host first")
    p.add_argument("--no-browser", action="store_true", help="print the URL but do not open it")
    p.add_argument("--show-token", action="store_true", help="print the Jupyter URL with its token (hidden otherwise)")
    p.add_argument("--accept-new", action="store_true", help="trust the host key if none is recorded yet")
    p.add_argument("--json", action="store_true", help="print one JSON line: local_port, remote_port, url")
    p.set_defaults(handler=run_tunnel)

    p = sub.add_parser("cost", help="what your hosts cost: running session, today, this month, budget",
                       description="Running cost of each host's open session, its totals for today and this "
                       "month, and where it stands against its (monthly) budget.")
    p.add_argument("name", metavar="NAME", nargs="?", help="only this host")
    p.add_argument("--csv", metavar="FILE", help="export the session history as CSV to FILE ('-': stdout)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=run_cost)

    p = sub.add_parser("cp", help="copy files and folders to or from a host over SFTP (resumes partial copies)",
                       usage="gpuws cp [-h] [-r] [-p] [--checksum] [--no-resume] [--accept-new] [--json] SRC... DST",
                       description="Copy SRC to DST, or several SRCs into the folder DST; the sources are all "
                       "NAME:PATH on one host, or all here, and DST is on the other side (like scp; a host path "
                       "may hold * ? [..] patterns). A partial copy left by an interrupted transfer is continued, "
                       "not started over; a file already the same (size and modification time) is skipped. "
                       "A copy longer than a second shows a progress bar on a terminal.")
    p.add_argument("paths", metavar="PATH", nargs="+", help="SRC... DST: the sources, then the destination")
    p.add_argument("-r", "--recursive", action="store_true", help="copy folders with everything in them (symlinks "
                   "are copied as links)")
    p.add_argument("-p", "--preserve", action="store_true", help="keep permission modes and access times too "
                   "(modification times are always kept)")
    p.add_argument("--checksum", action="store_true", help="skip a file only when its SHA-256 matches (runs "
                   "sha256sum on the host), not on size and time")
    p.add_argument("--no-resume", action="store_true", help="always copy from the start")
    p.add_argument("--accept-new", action="store_true", help="trust the host key if none is recorded yet")
    p.add_argument("--json", action="store_true", help="print the result as JSON; a copy longer than a second "
                   "prints progress lines before it ({\"event\": \"progress\", ...})")
    p.set_defaults(handler=run_cp)

    for action, text in (("start", "start the host's instance through its cloud provider"),
                         ("stop", "stop the host's instance through its cloud provider")):
        p = sub.add_parser(action, help=text, description=f"{text[0].upper()}{text[1:]}, with the same provider "
                           "command templates as resize (the provider token comes from the keyring).")
        p.add_argument("name", metavar="NAME", help="host profile name")
        p.add_argument("--dry-run", action="store_true", help="print the provider commands, run nothing")
        p.add_argument("--json", action="store_true", help="print the result as JSON")
        if action == "stop":
            p.add_argument("--pre-stop", metavar="COMMAND", help="run COMMAND on the host first (e.g. save a "
                           "checkpoint); the instance is not stopped if it fails")
            p.add_argument("--accept-new", action="store_true", help="trust the host key if none is recorded yet")
        p.set_defaults(handler=run_power_cli, action=action)


# -- shared ------------------------------------------------------------------------------------


def _run(coro: Any) -> int:
    """Run a command's coroutine (a GpuwsError goes up to `gpuws.cli.main`'s exit-status table)."""
    return int(asyncio.run(coro))


# -- tunnel ------------------------------------------------------------------------------------


def run_tunnel(args: argparse.Namespace) -> int:
    """`gpuws tunnel`: open a tunnel to the host and keep it until Ctrl-C."""
    return _run(_tunnel(args))


async def _tunnel(args: argparse.Namespace) -> int:
    from gpuws.app.targets import open_target
    from gpuws.app.tunnels import TunnelRequest, open_tunnel
    from gpuws.core.tunnels import Preset, TunnelState, parse_preset, vnc_viewer_argv

    preset = parse_preset(args.preset)
    if preset is Preset.CUSTOM and args.remote is None:
        raise ValidationError("remote", "give --remote PORT (or a --preset)")
    request = TunnelRequest(preset, args.remote, args.local, start=not args.no_start, logdir=args.logdir)
    request.check()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def on_connection(state: object, detail: str) -> None:
        if str(state) == "reconnecting" and not args.json:
            print(f"gpuws: {detail}", file=sys.stderr, flush=True)

    def on_tunnel(_t: object, state: TunnelState, detail: str) -> None:
        if detail and state in (TunnelState.FAILED, TunnelState.WAITING):
            print(f"gpuws: tunnel: {detail}", file=sys.stderr, flush=True)

    async with open_target(args.name, accept_new=args.accept_new, on_state=on_connection,
                           **tty_prompts()) as conn:
        tunnel = await open_tunnel(conn, request, on_state=on_tunnel)
        try:
            spec = tunnel.spec
            if tunnel.last_error and not args.json:
                print(f"gpuws: warning: {tunnel.last_error}; the tunnel stays open for when it starts",
                      file=sys.stderr)
            shown = tunnel.url if args.show_token else tunnel.display_url
            if args.json:
                print_json({"local_port": tunnel.local_port, "remote_port": spec.remote_port, "url": shown,
                            "preset": spec.preset.value})
            else:
                print(f"{spec.info.label}: {shown}  ->  {args.name}:{spec.remote_port}  (Ctrl-C to close)", flush=True)
                if shown != tunnel.url:
                    print("gpuws: the token is hidden (***); --show-token prints the URL with it", file=sys.stderr)
            if not args.no_browser:
                _open(tunnel.url, spec.info.opens_in_browser, vnc_viewer_argv(tunnel.local_port or 0))
            await stop.wait()
        finally:
            await tunnel.close()
    if not args.json:
        print("tunnel closed", file=sys.stderr)
    return 0


def _open(url: str, browser: bool, viewer: list[str] | None) -> None:
    """Open the tunnel's URL in the browser, or a VNC viewer (the token stays out of any output)."""
    if not browser and viewer:
        subprocess.Popen(viewer, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
        return
    import webbrowser

    if not webbrowser.open(url):
        print("gpuws: no browser or viewer found; open the URL yourself", file=sys.stderr)


# -- cost --------------------------------------------------------------------------------------


def run_cost(args: argparse.Namespace) -> int:
    """`gpuws cost`: what the sessions cost (a report, totals or CSV)."""
    from gpuws.core.cost import sessions_csv
    from gpuws.core.profiles import ProfileStore
    from gpuws.core.session import SessionLedger, budget_warning, cost_report, cost_totals

    profiles = ProfileStore().load()
    if args.name:
        profiles = [p for p in profiles if p.name == args.name]
        if not profiles:
            from gpuws.core.profiles import ProfileNotFound

            raise ProfileNotFound(args.name)
    ledger = SessionLedger()
    sessions = ledger.all_sessions()
    now = time.time()
    if args.csv:
        wanted = {p.name for p in profiles}
        text = sessions_csv([s for s in sessions if s.host in wanted], now)
        if args.csv == "-":
            sys.stdout.write(text)
        else:
            Path(args.csv).write_text(text, encoding="utf-8")
            print(f"wrote {args.csv}", file=sys.stderr)
        return 0
    report = cost_report(profiles, sessions, now)
    totals = cost_totals(report)
    if args.json:
        print_json({
            "hosts": [c.to_dict() for c in report],
            # Per currency, never summed across them; with no hosts, the locale's currency at zero.
            "totals": {currency: {"daily": round(daily, 4), "monthly": round(monthly, 4)}
                       for currency, (daily, monthly) in totals.items()},
        })
        return 0
    if not report:
        print("no hosts (add one with `gpuws hosts add`)")
        return 0
    print(_cost_table(report, totals))
    for cost in report:
        warning = budget_warning(cost)
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
    return 0


def _cost_table(report: list[HostCost], totals: dict[str, tuple[float, float]]) -> str:
    from gpuws.core.money import money as as_money

    rows = [("HOST", "PRICE/H", "RUNNING", "TODAY", "MONTH", "BUDGET")]
    for c in report:
        def money(value: float | None, currency: str = c.currency) -> str:
            return "-" if value is None else as_money(value, currency)

        # The budget nearest to being used up, daily or monthly (a daily budget alone showed "-").
        worst = c.worst_budget()
        period = f" {worst.period}" if worst.period else ""
        budget = ("-" if worst.budget is None else
                  f"{money(worst.spent)}/{money(worst.budget)}{period} ({worst.level})")
        rows.append((c.host, money(c.price_per_hour), money(c.running), money(c.daily), money(c.monthly), budget))
    # One total line per currency: amounts in different currencies are never added up.
    rows += [(f"TOTAL {currency}", "", "", as_money(daily, currency), as_money(monthly, currency), "")
             for currency, (daily, monthly) in totals.items()]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


# -- cp ----------------------------------------------------------------------------------------


def run_cp(args: argparse.Namespace) -> int:
    """`gpuws cp SRC... DST`: copy files and folders to or from a host."""
    from gpuws.app.files import plan_copy

    # Python's shutdown ends with a garbage collection over every object the imports made: ~0.07 s
    # of CPU and more of wall at the end of each copy (scp's whole run costs 0.1 s). Frozen first, at
    # exit, they are skipped; nothing of the copy is left to collect by then (once per process).
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    return _run(_cp(args, plan_copy(*args.paths)))  # RefusedInput: exit status 2, as before


async def _cp(args: argparse.Namespace, plan: CopyPlan) -> int:
    from gpuws.app.files import CopyOptions, copy
    from gpuws.app.targets import open_target
    from gpuws.core.terminal import printable
    from gpuws.core.transfer import shown_path

    progress = CopyProgressLine(json_lines=args.json, bar=sys.stderr.isatty() and not args.json)
    options = CopyOptions(recursive=args.recursive, preserve=args.preserve, resume=not args.no_resume,
                          checksum=args.checksum)
    try:
        async with open_target(plan.host, accept_new=args.accept_new, **tty_prompts()) as conn:
            result = await copy(conn, plan, progress=progress, options=options)
    finally:
        progress.finish()
    if args.json:
        print_json({"source": result.source, "destination": result.destination, "size": result.size,
                    "resumed_from": result.resumed_from, "files": result.files,
                    "transferred_files": result.transferred_files, "skipped": result.skipped,
                    "dirs": result.dirs, "links": result.links, "transferred": result.transferred,
                    "failed": [{"path": path, "reason": why} for path, why in result.failed]})
    else:
        resumed = f" (resumed at {result.resumed_from} bytes)" if result.resumed_from else ""
        if result.files == 1 and not result.dirs and not result.links:
            print(f"copied {result.size} bytes to {printable(result.destination)}{resumed}")
        else:
            skipped = f", {result.skipped} already there" if result.skipped else ""
            print(f"copied {result.transferred_files} of {result.files} files ({result.transferred} bytes sent"
                  f"{skipped}), {result.dirs} folders, {result.links} links to {printable(result.destination)}"
                  f"{resumed}")
    for path, why in result.failed:
        print(f"gpuws: cp: {shown_path(path)}: {why}", file=sys.stderr)
    return 1 if result.failed else 0


class CopyProgressLine:
    """The CLI's adapter for a copy's `TransferProgress`: a one-line bar on stderr (a terminal only) or
    JSON lines on stdout (`--json`); nothing for a copy that ends within its first second."""

    DELAY_S = 1.0  # a copy shorter than this shows nothing
    INTERVAL_S = 0.1  # the bar is redrawn at most this often
    JSON_INTERVAL_S = 0.5

    def __init__(self, *, json_lines: bool, bar: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self._json, self._bar = json_lines, bar
        self._clock = clock
        self._start = clock()
        self._last = float("-inf")
        self._drawn = False
    def __call__(self, event: TransferProgress) -> None:
        if not (self._json or self._bar):
            return
        now = self._clock()
        final = event.done >= event.total
        if now - self._start < self.DELAY_S or (now - self._last < (self.JSON_INTERVAL_S if self._json
                                                                      else self.INTERVAL_S) and not final):
            return
        self._last = now
        self._draw(event)

    def _draw(self, event: TransferProgress) -> None:
        from gpuws.core.terminal import printable
        from gpuws.core.transfer import eta_text, rate_text, size_text

        if self._json:
            print_json(event.to_dict())
            sys.stdout.flush()
            return
        self._drawn = True
        width = 24
        filled = int(event.fraction * width)
        name = printable(event.file, max_length=30)
        files = f"  file {event.file_index}/{event.file_count}" if event.file_count > 1 else ""
        sys.stderr.write(f"\r\x1b[K[{'#' * filled}{'.' * (width - filled)}] {event.fraction * 100:5.1f}%  "
                         f"{size_text(event.done)} of {size_text(event.total)}  {rate_text(event.rate)}  "
                         f"ETA {eta_text(event.eta)}{files}  {name}")
        sys.stderr.flush()

    def finish(self) -> None:
        """End the bar's line (once the copy ended, or failed)."""
        if self._drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()


# -- start / stop ------------------------------------------------------------------------------


def run_power_cli(args: argparse.Namespace) -> int:
    """`gpuws start` / `gpuws stop`: start or stop the host's instance through its provider."""
    from gpuws.app.power import parse_pre_stop, power_plan
    from gpuws.core.profiles import ProfileStore

    profile = ProfileStore().get(args.name)
    plan = power_plan(profile, args.action)
    pre_stop = parse_pre_stop(getattr(args, "pre_stop", None) or "")
    if args.dry_run:
        doc = {**plan.to_dict(), "pre_stop": pre_stop, "outcome": "dry run: nothing changed"}
        if args.json:
            print_json(doc)
        else:
            for step in doc["steps"]:
                print(step["command"])
        return 0
    def report(line: str) -> None:
        if not args.json:
            print(f"$ {line}" if not line.startswith("running") else line, file=sys.stderr, flush=True)

    async def go() -> Any:
        # Through the Workspace verb, as the window's Start/Stop: a start reads the instance's
        # address back from the provider and the profile follows a new one.
        if pre_stop:
            from gpuws.app.targets import open_host

            async with open_host(args.name, accept_new=getattr(args, "accept_new", False), probe=False,
                                 **tty_prompts()) as (workspace, record):
                assert record.connection is not None
                return await workspace.run_power(args.name, args.action, pre_stop=pre_stop,
                                                 host_runner=record.connection.runner, progress=report)
        from gpuws.app.targets import host_workspace

        async with host_workspace(args.name) as workspace:
            return await workspace.run_power(args.name, args.action, progress=report)

    result = asyncio.run(go())
    if args.json:
        print_json(result.to_dict())
    elif result.ok:
        moved = (f" (its address is now {result.address_after}, was {result.address_before})"
                 if result.address_after and result.address_after != result.address_before else "")
        print(f"{args.name}: {'started' if args.action == 'start' else 'stopped'}{moved}")
    return 0 if result.ok else fail(result.error or f"{args.action} failed")
