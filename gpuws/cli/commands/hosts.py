"""`gpuws hosts ...`: add, list, show and remove host profiles; import them from ~/.ssh/config."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpuws.cli.output import print_json
from gpuws.core.models import AuthMethod, HostProfile, ProviderInfo, SecretKind
from gpuws.core.profiles import ProfileStore, profile_to_dict
from gpuws.core.terminal import printable
from gpuws.core.validation import validate_port, validate_price

Handler = Callable[[argparse.Namespace], int]


def guarded(handler: Handler) -> Handler:
    """A hosts command; its GpuwsError reaches `gpuws.cli.main`, which maps it to the exit-status table
    (a refused field value is `gpuws: error: <field>: <reason>` and status 2)."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        """Run the hosts command; its errors go up unchanged."""
        return handler(args)

    return run


@contextmanager
def profile_store() -> Iterator[ProfileStore]:
    """The user's profile store; tells the user on stderr if a damaged file was moved aside."""
    store = ProfileStore()
    try:
        yield store
    finally:
        if store.last_recovery is not None:
            print(f"gpuws: warning: {store.last_recovery.message}", file=sys.stderr, flush=True)


def json_flag() -> argparse.ArgumentParser:
    """A parent parser giving a subcommand `--json`."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--json", action="store_true", help="print JSON for scripts")
    return parent


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Register `gpuws hosts` and its actions."""
    hosts = sub.add_parser("hosts", help="manage host profiles")
    actions = hosts.add_subparsers(dest="hosts_action", metavar="ACTION")
    common = [json_flag()]

    add = actions.add_parser("add", parents=common, help="add a host profile")
    add.add_argument("name", help="profile name (letters, digits, '.', '_', '-')")
    add.add_argument("--host", required=True, help="DNS name, IPv4 or IPv6 address")
    # Numbers are parsed by the validators, so a bad value gets the same one-line error as the rest.
    add.add_argument("--port", default="22", help="SSH port (default 22)")
    add.add_argument("--user", help="login name (default: ssh's default)")
    add.add_argument("--key", metavar="PATH", help="private key file (implies --auth key)")
    add.add_argument("--jump", metavar="NAME", help="another profile to use as jump host")
    add.add_argument("--price-per-hour", metavar="X", help="what the host costs per hour")
    add.add_argument("--auth", choices=[m.value for m in AuthMethod], help="how to log in (default: agent)")
    add.add_argument("--tag", action="append", default=[], metavar="T", help="a tag (repeatable)")
    add.add_argument("--provider", metavar="KIND", help="aws, gcp, alibaba, tencent or custom")
    add.add_argument("--instance-id", metavar="ID", help="the provider's instance id")
    add.add_argument("--region", metavar="R", help="the provider's region or zone")
    add.add_argument("--notes", default="", help="free text")
    add.set_defaults(handler=guarded(cmd_add))

    listing = actions.add_parser("list", parents=common, help="list host profiles")
    listing.set_defaults(handler=guarded(cmd_list))

    show = actions.add_parser("show", parents=common, help="show one host profile")
    show.add_argument("name")
    show.set_defaults(handler=guarded(cmd_show))

    remove = actions.add_parser("remove", parents=common, help="remove a host profile and its stored secrets")
    remove.add_argument("name")
    remove.set_defaults(handler=guarded(cmd_remove))

    imp = actions.add_parser(
        "import-ssh-config", parents=common, help="add profiles for the Host entries of an ssh config"
    )
    imp.add_argument("path", nargs="?", type=Path, help="config file (default ~/.ssh/config)")
    imp.add_argument("--dry-run", action="store_true", help="show what would be imported, change nothing")
    imp.set_defaults(handler=guarded(cmd_import))


def _key_path(raw: str | None) -> str | None:
    # Stored profiles outlive the current directory: make a relative path absolute now.
    if raw is None or raw.startswith("~"):
        return raw
    return os.path.abspath(raw)


def cmd_add(args: argparse.Namespace) -> int:
    """`gpuws hosts add`: validate and save a host profile (its secret goes to the keyring)."""
    key_path = _key_path(args.key)
    auth = AuthMethod(args.auth) if args.auth else (AuthMethod.KEY if key_path else AuthMethod.AGENT)
    profile = HostProfile(
        name=args.name,
        host=args.host,
        port=validate_port(args.port),
        user=args.user,
        auth=auth,
        key_path=key_path,
        jump=args.jump,
        provider=ProviderInfo(kind=args.provider, instance_id=args.instance_id, region=args.region),
        price_per_hour=validate_price(args.price_per_hour),
        tags=list(args.tag),
        notes=args.notes,
    )
    with profile_store() as store:
        stored = store.add(profile)
    if args.json:
        print_json(profile_to_dict(stored))
        return 0
    print(f"Added host {stored.name!r} ({_address(stored)}).")
    if stored.auth in (AuthMethod.PASSWORD, AuthMethod.KEYBOARD_INTERACTIVE):
        print(f"Store its password in the OS keyring with: gpuws secret set {stored.name} --kind password")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """`gpuws hosts list`: every saved profile."""
    with profile_store() as store:
        profiles = store.load()
    if args.json:
        print_json({"hosts": [profile_to_dict(p) for p in profiles]})
        return 0
    if not profiles:
        print("No host profiles yet. Add one with `gpuws hosts add NAME --host H` "
              "or `gpuws hosts import-ssh-config`.")
        return 0
    rows: list[tuple[str, ...]] = [("NAME", "ADDRESS", "AUTH", "JUMP", "PRICE/H", "TAGS")]
    rows += [
        tuple(printable(cell) for cell in (p.name, _address(p), str(p.auth), p.jump or "-",
                                           _price(p.price_per_hour), ",".join(p.tags) or "-"))
        for p in profiles
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """`gpuws hosts show NAME`: one profile, every field."""
    with profile_store() as store:
        profile = store.get(args.name)
    if args.json:
        print_json(profile_to_dict(profile))
        return 0
    provider = profile.provider
    lines = [
        ("name", profile.name),
        ("address", _address(profile)),
        ("auth", str(profile.auth)),
        ("key", profile.key_path or "-"),
        ("jump host", profile.jump or "-"),
        ("provider", " ".join(x for x in (provider.kind, provider.instance_id, provider.region) if x) or "-"),
        ("slice", profile.slice_profile or "-"),
        ("price", _price(profile.price_per_hour)),
        ("tags", ", ".join(profile.tags) or "-"),
        ("notes", profile.notes or "-"),
    ]
    if profile.simulated:
        lines.append(("simulated", "yes (the built-in demo host)"))
    for label, value in lines:
        # Profile values are user text (notes may hold anything): one printable line each.
        print(f"{label + ':':<11} {printable(value)}")
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    """`gpuws hosts remove NAME`: the profile and its secrets in the keyring."""
    with profile_store() as store:
        store.remove(args.name)
    cleared = _clear_secrets(args.name)
    if args.json:
        print_json({"removed": args.name, "secrets_cleared": [str(k) for k in cleared]})
        return 0
    note = f" and its {', '.join(map(str, cleared))} from the keyring" if cleared else ""
    print(f"Removed host {args.name!r}{note}.")
    return 0


def _clear_secrets(name: str) -> list[SecretKind]:
    """Delete a removed profile's secrets. Where there is no usable keyring none can exist."""
    from gpuws.core.secrets import KeyringUnavailable, SecretStore, unusable_reason  # keyring: only here

    secrets = SecretStore()
    if unusable_reason(secrets.backend) is not None:
        return []
    try:
        return secrets.clear_all(name)
    except KeyringUnavailable as exc:
        print(f"gpuws: warning: the profile is removed, but its secrets were not: {exc}", file=sys.stderr)
        return []


def cmd_import(args: argparse.Namespace) -> int:
    """`gpuws hosts import-ssh-config`: profiles from the Host entries of an ssh_config file."""
    from gpuws.core.sshconfig import import_ssh_config  # paramiko's parser: only for this command

    found = import_ssh_config(args.path)
    rejected = list(found.skipped)
    with profile_store() as store:
        if args.dry_run:
            present = {p.name.casefold() for p in store.load()}
            existing = [p.name for p in found.profiles if p.name.casefold() in present]
            added = [p for p in found.profiles if p.name.casefold() not in present]
        else:
            result = store.add_many(found.profiles)
            added, existing = result.added, result.existing
            rejected += result.rejected
    if args.json:
        print_json({
            "source": str(args.path) if args.path else "~/.ssh/config",
            "dry_run": bool(args.dry_run),
            "added": [p.name for p in added],
            "existing": existing,
            "skipped": [{"host": host, "reason": reason} for host, reason in rejected],
            "notes": [{"host": host, "note": note} for host, note in found.notes],
        })
        return 0
    verb = "Would add" if args.dry_run else "Added"
    print(f"{verb} {len(added)} host(s)" + (": " + ", ".join(p.name for p in added) if added else "."))
    if existing:
        print(f"Already present (left unchanged): {', '.join(existing)}")
    for host, reason in rejected:
        # Names come from the file: never let one write terminal control characters.
        print(f"Skipped {printable(host)}: {printable(reason)}")
    for host, note in found.notes:
        print(f"Note for {printable(host)}: {printable(note)}")
    return 0


def _address(profile: HostProfile) -> str:
    host = f"[{profile.host}]" if ":" in profile.host else profile.host
    user = f"{profile.user}@" if profile.user else ""
    return f"{user}{host}:{profile.port}"


def _price(price: float | None) -> str:
    return "-" if price is None else f"{price:.2f}"
