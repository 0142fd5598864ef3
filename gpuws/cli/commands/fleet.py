"""`gpuws fleet ...` (many GPUs through Prometheus + dcgm-exporter) and `gpuws demo-fleet`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, TextIO

from gpuws.cli.commands.hosts import json_flag, profile_store
from gpuws.cli.output import Subcommands, decimal_number, fail, print_json, whole_number

if TYPE_CHECKING:
    from gpuws.core.fleet.profiles import FleetProfile

MIN_INTERVAL_S = 1.0
MAX_INTERVAL_S = 3600.0
MAX_DEMO_HOSTS = 256
STORE_LAG_NOTE_S = 10.0  # a store this far behind the wall clock gets a line saying so

_EPILOG = """JSON output: {"fleet": NAME, "t": ISO, "gpus": [...], "not_reporting": [...], "empty": null or
{"reason": "no_series"|"stale", "message"}, "insecure": BOOL}; one object per GPU and per MIG instance with
host, gpu, uuid, model and the fields of `gpuws watch --json` (a metric the exporter does not publish is null),
throttle_source (the metric, or "not exported"), xids/xid_class, age_s (counted from the store's newest sample,
"store_t"; "store_lag_s" is how far that is behind "t"), scrape_interval_s, exporter_up and stale;
not_reporting: GPUs seen in the last hour that report nothing now, with since and exporter_up.
exit status (the table of `gpuws --help`): 0 ok, 2 refused input, 3 Prometheus refused the credentials,
5 Prometheus unreachable, 1 any other error"""


def register(sub: Subcommands) -> None:
    """Register `gpuws fleet` and `gpuws demo-fleet`."""
    fleet = sub.add_parser("fleet", help="fleets of GPUs read from Prometheus (dcgm-exporter metrics)")
    actions = fleet.add_subparsers(dest="fleet_action", metavar="ACTION")
    common = [json_flag()]

    add = actions.add_parser("add", parents=common, help="add a fleet: a Prometheus that scrapes dcgm-exporter")
    add.add_argument("name", help="fleet name (letters, digits, '.', '_', '-')")
    add.add_argument("--prometheus", required=True, metavar="URL", help="Prometheus base URL, e.g. http://prom:9090")
    add.add_argument("--via", metavar="HOST", help="reach Prometheus through an SSH tunnel over this host profile")
    add.add_argument("--selector", metavar="LABELS",
                     help='PromQL label matchers picking the fleet\'s series, e.g. \'cluster="a",namespace="ml"\'')
    add.add_argument("--token-stdin", action="store_true", help="read a bearer token from stdin (kept in the keyring)")
    add.add_argument("--user", help="basic-auth user (the password is read with --password-stdin)")
    add.add_argument("--password-stdin", action="store_true",
                     help="read the basic-auth password from stdin (kept in the keyring)")
    add.add_argument("--price-per-gpu-hour", type=decimal_number, metavar="PRICE",
                     help="what one GPU costs per hour, for the idle-GPU alert")
    add.add_argument("--ca-file", metavar="PEM", help="trust this CA (a private CA) instead of the public bundle")
    add.add_argument("--client-cert", metavar="PEM", help="client certificate for a server that asks for one")
    add.add_argument("--client-key", metavar="PEM", help="the client certificate's private key (a file)")
    add.add_argument("--tenant", metavar="ID", help="tenant sent as X-Scope-OrgID (Grafana Mimir, Cortex)")
    add.add_argument("--insecure", action="store_true",
                     help="do not verify the server's TLS certificate (said wherever the fleet is shown)")
    add.set_defaults(handler=cmd_add)

    lst = actions.add_parser("list", parents=common, help="list fleets")
    lst.set_defaults(handler=cmd_list)

    rm = actions.add_parser("remove", parents=common, help="delete a fleet (and its credentials in the keyring)")
    rm.add_argument("name")
    rm.set_defaults(handler=cmd_remove)

    repair = actions.add_parser("repair", parents=common, help="move a damaged fleets file aside, keeping its "
                                "valid fleets (gpuws never does it unasked)")
    repair.set_defaults(handler=cmd_repair)

    snap = actions.add_parser("snapshot", parents=common, help="every GPU of the fleet now", epilog=_EPILOG)
    snap.add_argument("name")
    snap.add_argument("--accept-new", action="store_true", help="trust the --via host's key if none is recorded yet")
    snap.set_defaults(handler=cmd_snapshot)

    watch = actions.add_parser("watch", parents=common, help="stream the fleet's GPUs", epilog=_EPILOG)
    watch.add_argument("name")
    watch.add_argument("--interval", type=decimal_number, default=5.0, metavar="S",
                       help=f"seconds between snapshots ({MIN_INTERVAL_S:g}-{MAX_INTERVAL_S:g}, default 5)")
    watch.add_argument("--count", type=whole_number, metavar="N", help="stop after N snapshots")
    watch.add_argument("--accept-new", action="store_true", help="trust the --via host's key if none is recorded yet")
    watch.set_defaults(handler=cmd_watch)

    demo = sub.add_parser("demo-fleet", help="run SIMULATED dcgm-exporters on loopback for a Prometheus to scrape")
    demo.add_argument("--hosts", type=whole_number, required=True, metavar="N",
                      help=f"simulated hosts (1-{MAX_DEMO_HOSTS})")
    demo.add_argument("--gpus-per-host", type=whole_number, default=8, metavar="M",
                      help="GPUs per host (1-16, default 8)")
    demo.add_argument("--fault", action="append", default=[], metavar="KIND:HOST/GPU",
                      help="play a fault on GPU GPU of host number HOST: gpu-lost (XID 79, the exporter stops "
                           "publishing it), xid-app (XID 13); repeatable")
    demo.set_defaults(handler=run_demo_fleet)


def _read_secret(what: str) -> str:
    from gpuws.core.stdin import read_secret

    # The one bounded stdin reader: at most 64 KiB of text without NUL, or exit 2 and nothing stored.
    return read_secret(sys.stdin, f"fleet: the {what}", f"{what} (input hidden): ")


def cmd_add(args: argparse.Namespace) -> int:
    """`gpuws fleet add`: save a fleet (its Prometheus URL, auth and host match) and its secret."""
    from gpuws.core.errors import ValidationError
    from gpuws.core.fleet.profiles import (
        SECRET_SERVICE,
        FleetAuth,
        FleetExists,
        FleetProfile,
        FleetStore,
        validate_fleet,
    )
    from gpuws.core.models import SecretKind
    from gpuws.core.secrets import SecretStore

    if args.token_stdin and (args.user or args.password_stdin):
        raise ValidationError("auth", "give either --token-stdin or --user with --password-stdin, not both")
    if bool(args.user) != bool(args.password_stdin):
        raise ValidationError("auth", "basic auth needs both --user and --password-stdin")
    auth = FleetAuth.BEARER if args.token_stdin else FleetAuth.BASIC if args.user else FleetAuth.NONE
    profile = validate_fleet(FleetProfile(
        name=args.name, prometheus=args.prometheus, via=args.via, selector=args.selector, auth=auth,
        user=args.user, price_per_gpu_hour=args.price_per_gpu_hour, ca_file=_abspath(args.ca_file),
        client_cert=_abspath(args.client_cert), client_key=_abspath(args.client_key), tenant=args.tenant,
        insecure=args.insecure))
    if profile.via is not None:
        with profile_store() as hosts:
            hosts.get(profile.via)  # the tunnel host must be a profile already
    store = FleetStore()
    if any(f.name.casefold() == profile.name.casefold() for f in store.load()):
        raise FleetExists(profile.name)
    if auth is not FleetAuth.NONE:
        secrets = SecretStore(service=SECRET_SERVICE)
        secrets.ensure_usable()  # before reading the secret, not after
        kind = SecretKind.TOKEN if auth is FleetAuth.BEARER else SecretKind.PASSWORD
        secrets.set(profile.name, kind, _read_secret("bearer token" if kind is SecretKind.TOKEN else "password"))
    store.add(profile)
    _recovery_note(store)
    if args.json:
        print_json(profile.to_dict())
    else:
        print(f"Added fleet {profile.name!r}: {profile.prometheus}" + (f" via {profile.via}" if profile.via else ""))
    return 0


def _abspath(path: str | None) -> str | None:
    """A file option as an absolute path (the profile is used from any directory)."""
    import os

    return None if path is None else os.path.abspath(os.path.expanduser(path))


def connection_words(profile: FleetProfile) -> str:
    """How a fleet connects, in words: " INSECURE (TLS not verified)", tenant, CA (empty: defaults)."""
    return "".join([" INSECURE (TLS not verified)" if profile.insecure else "",
                    f" tenant {profile.tenant}" if profile.tenant else "",
                    f" CA {profile.ca_file}" if profile.ca_file else "",
                    " client certificate" if profile.client_cert else ""])


def cmd_list(args: argparse.Namespace) -> int:
    """`gpuws fleet list`: the saved fleets."""
    from gpuws.core.fleet.profiles import FleetStore

    store = FleetStore()
    fleets = store.load()
    _recovery_note(store)
    if args.json:
        # A broken fleet (a hand edit with a wrong value) stays listed, with where and why.
        print_json([{**f.to_dict(), "error": None} for f in fleets]
                   + [{"name": b.name, "error": b.problem.to_dict()} for b in store.state.broken])
        return 0
    if not fleets:
        print("No fleets. Add one with `gpuws fleet add NAME --prometheus URL`.")
    for f in fleets:
        extra = "".join([f" via {f.via}" if f.via else "", f" {{{f.selector}}}" if f.selector else "",
                         f" ({f.auth} auth)" if f.auth != "none" else "", connection_words(f)])
        print(f"{f.name}  {f.prometheus}{extra}")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    """`gpuws fleet remove`: drop a fleet and its secret from the keyring."""
    from gpuws.core.fleet.profiles import SECRET_SERVICE, FleetAuth, FleetStore
    from gpuws.core.secrets import SecretStore

    store = FleetStore()
    profile = store.get(args.name)
    store.remove(args.name)
    if profile.auth is not FleetAuth.NONE:
        SecretStore(service=SECRET_SERVICE).clear_all(profile.name)
    if args.json:
        print_json({"name": args.name, "removed": True})
    else:
        print(f"Removed fleet {args.name!r}.")
    return 0


def cmd_repair(args: argparse.Namespace) -> int:
    """`gpuws fleet repair`: move a damaged fleets file aside, keeping its valid fleets."""
    from gpuws.cli.commands.hosts import run_repair
    from gpuws.core.fleet.profiles import FleetStore

    return run_repair(FleetStore(), as_json=args.json)


def _recovery_note(store: Any) -> None:
    # The fleets file's warnings, broken fleets and read-only reason (file:line: key: message).
    for line in store.state.notices():
        print(f"gpuws: warning: {line}", file=sys.stderr, flush=True)


def cmd_snapshot(args: argparse.Namespace) -> int:
    """`gpuws fleet snapshot`: one reading of every GPU of the fleet."""
    import asyncio

    return asyncio.run(_stream(args, count=1, interval=0.0, out=sys.stdout, document=True))


def cmd_watch(args: argparse.Namespace) -> int:
    """`gpuws fleet watch`: read the fleet every --interval seconds (--count times, or until Ctrl-C)."""
    if not MIN_INTERVAL_S <= args.interval <= MAX_INTERVAL_S:
        return fail(f"--interval must be between {MIN_INTERVAL_S:g} and {MAX_INTERVAL_S:g} seconds", 2)
    if args.count is not None and args.count < 1:
        return fail("--count must be at least 1", 2)
    import asyncio

    return asyncio.run(_stream(args, count=args.count, interval=args.interval, out=sys.stdout, document=False))


async def _stream(args: argparse.Namespace, *, count: int | None, interval: float, out: TextIO,
                  document: bool) -> int:
    import asyncio

    from gpuws.app.fleet import open_fleet
    from gpuws.core.fleet.profiles import FleetStore
    from gpuws.core.telemetry.sample import iso8601

    profile = FleetStore().get(args.name)
    if profile.insecure:
        print(f"gpuws: warning: {profile.name}: INSECURE: the TLS certificate of {profile.prometheus} is not "
              "verified", file=sys.stderr, flush=True)
    async with open_fleet(profile, accept_new=args.accept_new) as source:
        seen = 0
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            snap = await source.snapshot()
            if snap.empty_message:
                print(f"gpuws: warning: {snap.empty_message}", file=sys.stderr, flush=True)
            if args.json and document:
                print_json(snap.to_dict())
            elif args.json:
                for gpu in snap.gpus:  # one object per line, as `gpuws watch --json`
                    print_json({"fleet": snap.fleet, **gpu.to_dict(snap.t)})
                for gone in snap.missing:
                    print_json({"fleet": snap.fleet, "t": iso8601(snap.t), **gone.to_dict()})
            else:
                out.write(format_snapshot(snap) + "\n")
                out.flush()
            seen += 1
            if count is not None and seen >= count:
                return 0
            await asyncio.sleep(max(0.0, interval - (loop.time() - started)))


def format_snapshot(snap: Any) -> str:
    """A table: one line per GPU, most urgent first, under a fleet-wide summary."""
    from gpuws.core.fleet.model import rank, summarize
    from gpuws.core.telemetry.sample import iso8601

    def v(value: float | None, unit: str = "") -> str:
        """A figure with its unit, or "-" when there is none."""
        return "-" if value is None else f"{value:.0f}{unit}"

    s = summarize(snap.gpus, price_per_gpu_hour=None, missing=snap.missing)
    sim = "[SIMULATED] " if any(g.simulated for g in snap.gpus) else ""
    insecure = "[INSECURE: TLS not verified] " if snap.insecure else ""
    lines = [f"{sim}{insecure}fleet {snap.fleet}  {iso8601(snap.t)}  {s.counted()}  "
             f"util {v(s.util_avg_pct, '%')}  mem {v(s.mem_used_mib)}/{v(s.mem_total_mib)} MiB  "
             f"power {v(s.power_w, ' W')}"]
    lag = snap.store_lag_s
    if lag is not None and lag >= STORE_LAG_NOTE_S:
        # Ages count from the store's newest sample; say how far that is behind, once.
        lines.append(f"(the store's newest data is {lag:.0f} s old: VictoriaMetrics holds the newest 30 s back by "
                     "default, -search.latencyOffset; ages below count from its newest data)")
    rows = [("HOST", "GPU", "MODEL", "UTIL", "MEMORY MiB", "TEMP", "POWER W", "ATTENTION")]
    for gone in snap.missing:  # at the top: a GPU that fell off the bus says nothing any more
        rows.append((gone.host, gone.device_key, gone.model or "-", "-", "-", "-", "-", gone.describe()))
    for attention, g in rank(snap.gpus):
        notes = [attention.label]
        if g.gi is None and g.throttle_source is None:
            notes.append("throttle not exported")
        if g.exporter_up is False:
            notes.append("exporter down")
        elif g.stale and g.age_s is not None:
            notes.append(f"values {g.age_s:.0f} s old")
        rows.append((g.host, g.device_key, g.model or "-", v(g.value("util_gpu_pct"), "%"),
                     f"{v(g.value('mem_used_mib'))}/{v(g.value('mem_total_mib'))}", v(g.value("temp_c"), "C"),
                     v(g.value("power_w")), ", ".join(notes)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)


def run_demo_fleet(args: argparse.Namespace) -> int:
    """`gpuws demo-fleet`: serve simulated dcgm-exporters and a Prometheus that scrapes them."""
    import signal
    import threading

    from gpuws.sim.dcgm_exporter import ExporterFault, SimFleet, make_hosts

    if not 1 <= args.hosts <= MAX_DEMO_HOSTS:
        return fail(f"--hosts must be between 1 and {MAX_DEMO_HOSTS}", 2)
    if not 1 <= args.gpus_per_host <= 16:
        return fail("--gpus-per-host must be between 1 and 16", 2)
    hosts = make_hosts(args.hosts, args.gpus_per_host, dynamic=True)
    for spec in args.fault:
        kind_text, _, where = spec.partition(":")
        host_text, _, gpu_text = where.partition("/")
        try:
            kind = ExporterFault(kind_text)
            hosts[int(host_text)].fault(kind, int(gpu_text))
        except (ValueError, IndexError):
            kinds = ", ".join(k.value for k in ExporterFault)
            return fail(f"--fault {spec[:40]!r}: give KIND:HOST/GPU with KIND one of {kinds}, HOST 0-"
                        f"{args.hosts - 1}, GPU 0-{args.gpus_per_host - 1}", 2)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        fleet = SimFleet(hosts).start()
    except OSError as exc:
        return fail(f"cannot start the simulated exporters: {exc.strerror or exc}")
    try:
        print_json({"targets": fleet.targets, "simulated": True})
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        fleet.stop()
    return 0
