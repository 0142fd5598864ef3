"""`gpuws hosts ...`: add, edit, list, show and remove host profiles; import them from ~/.ssh/config;
repair a damaged profiles file (only when asked)."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuws.cli.output import fail, print_json
from gpuws.core.errors import ValidationError
from gpuws.core.models import AddressFrom, AuthMethod, HostProfile, ProviderInfo, SecretKind
from gpuws.core.profiles import ProfileStore, profile_to_dict
from gpuws.core.recordfile import NamedRecordStore
from gpuws.core.terminal import printable
from gpuws.core.validation import (
    check_private_key_file,
    validate_currency,
    validate_port,
    validate_price,
    validate_slice_profile,
)

if TYPE_CHECKING:  # argparse only where parsers are built: `hosts list` is parsed without it (#35)
    import argparse

    from gpuws.cli.output import Subcommands
    from gpuws.cli.parsing import OneLineParser

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
def profile_store(*, broken_too: bool = True) -> Iterator[ProfileStore]:
    """The user's profile store; afterwards tells the user on stderr what is wrong in the file
    (file:line: key: message), every time, until they fix it. `broken_too=False`: the caller
    shows the broken profiles itself (`hosts list`)."""
    store = ProfileStore()
    try:
        yield store
    finally:
        state = store.state
        lines = state.notices() if broken_too else dataclasses.replace(state, broken=[]).notices()
        for line in lines:
            print(f"gpuws: warning: {printable(line)}", file=sys.stderr, flush=True)


def json_flag() -> OneLineParser:
    """A parent parser giving a subcommand `--json` (a OneLineParser, the class of the parsers it
    is a parent of; argparse reads only its arguments)."""
    from gpuws.cli.parsing import OneLineParser

    parent = OneLineParser(add_help=False)
    parent.add_argument("--json", action="store_true", help="print JSON for scripts")
    return parent


ACTIONS = ("add", "edit", "repair", "list", "show", "remove", "import-ssh-config")


def register(sub: Subcommands, action: str | None = None) -> None:
    """Register `gpuws hosts` and its actions; given one of them (`action`, from gpuws.cli.main's
    quick parser), only that one: `hosts list` built all seven, ~4 ms of its start (#35)."""
    hosts = sub.add_parser("hosts", help="manage host profiles")
    actions = hosts.add_subparsers(dest="hosts_action", metavar="ACTION")
    common = [json_flag()]

    def wanted(name: str) -> bool:
        """Whether to build action `name`: every one, unless the command line names one."""
        return action not in ACTIONS or name == action

    if wanted("add"):
        add = actions.add_parser("add", parents=common, help="add a host profile")
        add.add_argument("name", help="profile name (letters, digits, '.', '_', '-')")
        _profile_options(add, editing=False)
        add.set_defaults(handler=guarded(cmd_add))

    if wanted("edit"):
        edit = actions.add_parser(
            "edit", parents=common, help="change settings of a host profile",
            description="Change the settings given, keep the rest (and anything else in the file, comments too). "
                        "An empty value ('') clears an optional setting. --editor opens the profile's table in "
                        "$VISUAL/$EDITOR instead, checks it on save and reopens it with the error until it is "
                        "valid or left unchanged.")
        edit.add_argument("name", help="the profile to change")
        _profile_options(edit, editing=True)
        edit.add_argument("--editor", action="store_true", help="edit the profile's TOML table in $VISUAL/$EDITOR")
        edit.set_defaults(handler=guarded(cmd_edit))

    if wanted("repair"):
        repair = actions.add_parser(
            "repair", parents=common, help="move a damaged profiles file aside and keep its valid profiles",
            description="Only on request: moves profiles.toml to profiles.toml.corrupt-STAMP (unchanged) and writes "
                        "back the profiles that are valid. Without it gpuws never moves or rewrites a damaged file.")
        repair.set_defaults(handler=guarded(cmd_repair))

    if wanted("list"):
        listing = actions.add_parser("list", parents=common, help="list host profiles")
        listing.set_defaults(handler=guarded(cmd_list))

    if wanted("show"):
        show = actions.add_parser("show", parents=common, help="show one host profile")
        show.add_argument("name")
        show.set_defaults(handler=guarded(cmd_show))

    if wanted("remove"):
        remove = actions.add_parser("remove", parents=common, help="remove a host profile and its stored secrets")
        remove.add_argument("name")
        remove.set_defaults(handler=guarded(cmd_remove))

    if wanted("import-ssh-config"):
        imp = actions.add_parser(
            "import-ssh-config", parents=common, help="add profiles for the Host entries of an ssh config"
        )
        imp.add_argument("path", nargs="?", type=Path, help="config file (default ~/.ssh/config)")
        imp.add_argument("--dry-run", action="store_true", help="show what would be imported, change nothing")
        imp.set_defaults(handler=guarded(cmd_import))


def _key_path(raw: str | None) -> str | None:
    """`--key`: a private key file, checked now (a device, a directory or a file that is not a
    private key is refused, exit 2); stored absolute, as profiles outlive the current directory."""
    if raw is None or raw == "":
        return raw
    path = raw if raw.startswith("~") else os.path.abspath(raw)
    check_private_key_file(path)
    return path


def _profile_options(parser: argparse.ArgumentParser, *, editing: bool) -> None:
    """Every setting of a profile as an option; the same for `hosts add` and `hosts edit` (where
    nothing is required and an option not given leaves the setting as it is)."""
    import argparse

    # Numbers are parsed by the validators, so a bad value gets the same one-line error as the rest.
    parser.add_argument("--host", required=not editing, help="DNS name, IPv4 or IPv6 address")
    parser.add_argument("--port", default=None if editing else "22", help="SSH port (default 22)")
    parser.add_argument("--user", help="login name (default: ssh's default)")
    parser.add_argument("--key", metavar="PATH", help="private key file (implies --auth key)")
    parser.add_argument("--jump", metavar="NAME", help="another profile to use as jump host")
    parser.add_argument("--price-per-hour", metavar="X", help="what the host costs per hour")
    parser.add_argument("--auth", choices=[m.value for m in AuthMethod], help="how to log in (default: agent)")
    parser.add_argument("--tag", action="append", default=None if editing else [], metavar="T",
                        help="a tag (repeatable" + ("; replaces the tags)" if editing else ")"))
    parser.add_argument("--provider", metavar="KIND", help="aws, gcp, alibaba, tencent or custom")
    parser.add_argument("--instance-id", metavar="ID", help="the provider's instance id")
    parser.add_argument("--region", metavar="R", help="the provider's region or zone")
    parser.add_argument("--address-from", choices=[a.value for a in AddressFrom] + ([""] if editing else []),
                        help="which address of the instance to read back from the provider after a start or "
                             "resize (a new public address each start without an elastic IP): public (the "
                             "default), private or dns")
    parser.add_argument("--notes", default=None if editing else "", help="free text")
    parser.add_argument("--currency", metavar="CODE", help="ISO 4217 code of its prices, e.g. EUR "
                        "(default: the locale's)")
    parser.add_argument("--budget-daily", metavar="X", help="daily spending limit (warning at 80 %%)")
    parser.add_argument("--budget-monthly", metavar="X", help="monthly spending limit (warning at 80 %%)")
    parser.add_argument("--budget-stop", action=argparse.BooleanOptionalAction, default=None,
                        help="stop the instance when a budget is used up")
    parser.add_argument("--slice-price", action="append", default=[], metavar="PROFILE=PRICE",
                        help="price per hour of one slice, e.g. 1g.10gb=0.50 or full=3.20 (repeatable; "
                             "an empty PRICE removes it)")
    parser.add_argument("--instance-type", metavar="TYPE",
                        help="the cloud instance type it runs as now, e.g. g6f.large (kept as its slice; "
                             "`gpuws slices NAME` then lists the type's family with prices)")


def _slice_prices(given: list[str], current: dict[str, float]) -> dict[str, float]:
    """`current` with each PROFILE=PRICE of `--slice-price` set (an empty PRICE removes it)."""
    prices = dict(current)
    for item in given:
        profile, sep, price = item.partition("=")
        field = f"slice_prices.{profile}"
        if not sep or not profile:
            raise ValidationError("slice-price", f"{printable(item)!r} is not PROFILE=PRICE, e.g. 1g.10gb=0.50")
        validate_slice_profile(profile, field)
        if price != "":  # removing a price is always allowed, whatever its name
            from gpuws.core.resize.pricing import check_slice_price_key  # the catalog: only when asked

            check_slice_price_key(profile, field)
        if price == "":
            prices.pop(profile, None)
        else:
            prices[profile] = validate_price(price, field) or 0.0
    return prices


def _cleared(value: str | None) -> str | None:
    """An option's text; '' (clear the setting) becomes None."""
    return value if value else None


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
        provider=ProviderInfo(kind=args.provider, instance_id=args.instance_id, region=args.region,
                              address_from=AddressFrom(args.address_from) if args.address_from else None),
        price_per_hour=validate_price(args.price_per_hour),
        slice_prices=_slice_prices(args.slice_price, {}),
        tags=list(args.tag),
        slice_profile=_cleared(args.instance_type),
        notes=args.notes,
        budget=validate_price(args.budget_monthly, "budget_monthly"),
        budget_daily=validate_price(args.budget_daily, "budget_daily"),
        budget_stop=bool(args.budget_stop),
        currency=validate_currency(args.currency),
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


# Options of `hosts edit` that change the profile (all but the name, --json and --editor).
_SETTINGS = ("host", "port", "user", "key", "jump", "price_per_hour", "auth", "tag", "provider", "instance_id",
             "region", "address_from", "notes", "currency", "budget_daily", "budget_monthly", "budget_stop")


def cmd_edit(args: argparse.Namespace) -> int:
    """`gpuws hosts edit NAME`: change the settings given and keep the rest (or edit in $EDITOR)."""
    given = [name for name in (*_SETTINGS, "instance_type") if getattr(args, name) is not None] + (
        ["slice_price"] if args.slice_price else [])
    if args.editor:
        if given:
            return fail("--editor edits the whole profile; give no other settings with it", 2)
        from gpuws.cli.editing import edit_in_editor

        with profile_store() as store:
            return edit_in_editor(store, args.name)
    if not given:
        return fail("give at least one setting to change (see `gpuws hosts edit --help`), or --editor", 2)
    with profile_store() as store:
        old = store.get(args.name)  # a broken profile: exit 2 naming file:line: key
        changed = _edited(old, args)
        stored = store.update(changed)
    if args.json:
        print_json(profile_to_dict(stored))
    else:
        print(f"Changed host {stored.name!r}: {', '.join(_changed_fields(old, stored)) or 'nothing'}.")
    return 0


def _edited(old: HostProfile, args: argparse.Namespace) -> HostProfile:
    """`old` with the settings given on the command line ('' clears an optional one)."""
    changes: dict[str, Any] = {}
    if args.host is not None:
        changes["host"] = args.host
    if args.port is not None:
        changes["port"] = validate_port(args.port)
    if args.user is not None:
        changes["user"] = _cleared(args.user)
    if args.key is not None:
        changes["key_path"] = _key_path(_cleared(args.key))
        if changes["key_path"] and args.auth is None:
            changes["auth"] = AuthMethod.KEY
    if args.auth is not None:
        changes["auth"] = AuthMethod(args.auth)
    if args.jump is not None:
        changes["jump"] = _cleared(args.jump)
    if args.price_per_hour is not None:
        changes["price_per_hour"] = validate_price(_cleared(args.price_per_hour))
    if args.tag is not None:
        changes["tags"] = [t for t in args.tag if t]
    if args.notes is not None:
        changes["notes"] = args.notes
    if args.instance_type is not None:
        changes["slice_profile"] = _cleared(args.instance_type)
    if args.currency is not None:
        changes["currency"] = validate_currency(args.currency)
    if args.budget_daily is not None:
        changes["budget_daily"] = validate_price(_cleared(args.budget_daily), "budget_daily")
    if args.budget_monthly is not None:
        changes["budget"] = validate_price(_cleared(args.budget_monthly), "budget_monthly")
    if args.budget_stop is not None:
        changes["budget_stop"] = args.budget_stop
    if args.slice_price:
        changes["slice_prices"] = _slice_prices(args.slice_price, old.slice_prices)
    if any(v is not None for v in (args.provider, args.instance_id, args.region, args.address_from)):
        address = args.address_from
        changes["provider"] = dataclasses.replace(
            old.provider,
            kind=old.provider.kind if args.provider is None else _cleared(args.provider),
            instance_id=old.provider.instance_id if args.instance_id is None else _cleared(args.instance_id),
            region=old.provider.region if args.region is None else _cleared(args.region),
            address_from=old.provider.address_from if address is None else (AddressFrom(address) if address
                                                                             else None),
        )
    return dataclasses.replace(old, **changes)


def _changed_fields(old: HostProfile, new: HostProfile) -> list[str]:
    before, after = profile_to_dict(old), profile_to_dict(new)
    return [key for key in after if before.get(key) != after[key]]


def cmd_repair(args: argparse.Namespace) -> int:
    """`gpuws hosts repair`: move a damaged profiles file aside, keeping its valid profiles."""
    return run_repair(ProfileStore(), as_json=args.json)


def run_repair(store: NamedRecordStore[Any], *, as_json: bool) -> int:
    """`hosts repair` / `fleet repair`: move the damaged file aside and keep its valid records."""
    notice = store.repair()
    if as_json:
        print_json({"repaired": notice is not None, "backup": str(notice.backup_path) if notice else None,
                    "kept": [r.name for r in store.load()]})
        return 0
    print(printable(notice.message) if notice else f"Nothing to repair in {store.path}.")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """`gpuws hosts list`: every saved profile, and the broken ones with their error."""
    with profile_store(broken_too=False) as store:
        profiles = store.load()
        state = store.state
    if args.json:
        print_json({
            "hosts": sorted([{**profile_to_dict(p), "error": None} for p in profiles]
                            + [{"name": b.name, "error": b.problem.to_dict()} for b in state.broken],
                            key=lambda h: (str(h["name"]).casefold(), str(h["name"]))),
            "file": str(store.path),
            "read_only": None if state.read_only is None else {**state.read_only.to_dict(),
                                                                "column": state.read_only.column},
            "warnings": [w.to_dict() for w in state.warnings],
        })
        return 0
    if not profiles and not state.broken:
        print("No host profiles yet. Add one with `gpuws hosts add NAME --host H` "
              "or `gpuws hosts import-ssh-config`.")
        return 0
    rows: list[tuple[str, ...]] = [("NAME", "ADDRESS", "AUTH", "JUMP", "PRICE/H", "TAGS")]
    rows += [
        tuple(printable(cell) for cell in (p.name, _address(p), str(p.auth), p.jump or "-",
                                           _price(p.price_per_hour), ",".join(p.tags) or "-"))
        for p in profiles
    ]
    # A broken profile stays listed, with its error: a hand edit never makes a host vanish.
    rows += [(printable(b.name or f"#{b.number}"), "BROKEN", "-", "-", "-", "-") for b in state.broken]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    for b in state.broken:
        print(printable(f"{b.name or f'#{b.number}'}: {b.problem}"))
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
        ("reads", f"the provider's {provider.address_source} address after a start"
         if provider.kind else "-"),
        ("slice", profile.slice_profile or "-"),
        ("price", _price(profile.price_per_hour)),
        ("slices", ", ".join(f"{k}={_price(v)}" for k, v in sorted(profile.slice_prices.items())) or "-"),
        ("currency", profile.currency or "- (the locale's)"),
        ("budgets", f"daily {_price(profile.budget_daily)}, monthly {_price(profile.budget)}"
                    + (", stop when used up" if profile.budget_stop else "")),
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
