"""`gpuws secret ...`: store or delete a profile's password, key passphrase or provider token.

The value is read from stdin when it is not a terminal (for scripts: `pass x | gpuws secret set`),
else from a hidden prompt; never from argv, where it would land in shell history and `ps`.
"""

from __future__ import annotations

import argparse
import sys

from gpuws.cli.commands.hosts import guarded, json_flag, profile_store
from gpuws.cli.output import Subcommands, print_json
from gpuws.core.errors import RefusedInput
from gpuws.core.models import SecretKind
from gpuws.core.secrets import SecretStore, describe_backend
from gpuws.core.stdin import read_secret
from gpuws.core.validation import validate_name


def register(sub: Subcommands) -> None:
    """Register `gpuws secret` and its actions."""
    secret = sub.add_parser("secret", help="store credentials in the OS keyring")
    actions = secret.add_subparsers(dest="secret_action", metavar="ACTION")
    kinds = [k.value for k in SecretKind]

    set_ = actions.add_parser(
        "set", parents=[json_flag()], help="store a secret (read from stdin or a hidden prompt)"
    )
    set_.add_argument("name", help="the host profile")
    set_.add_argument("--kind", required=True, choices=kinds)
    # Catches a value typed on the command line so we can refuse it without echoing it back
    # (argparse would print "unrecognized arguments: <the secret>").
    set_.add_argument("stray", nargs="*", help=argparse.SUPPRESS)
    set_.set_defaults(handler=guarded(cmd_set))

    clear = actions.add_parser("clear", parents=[json_flag()], help="delete a stored secret")
    clear.add_argument("name", help="the host profile")
    clear.add_argument("--kind", required=True, choices=kinds)
    clear.set_defaults(handler=guarded(cmd_clear))


def _read_secret(name: str, kind: SecretKind) -> str:
    # The one bounded stdin reader: at most 64 KiB of text without NUL, or exit 2 and nothing stored.
    return read_secret(sys.stdin, "secret", f"{kind} for {name} (input hidden): ")


def cmd_set(args: argparse.Namespace) -> int:
    """`gpuws secret set NAME`: read a password or passphrase from the terminal or stdin into the keyring."""
    if args.stray:
        raise RefusedInput(
            "secret: refusing a secret given on the command line (shell history and `ps` would keep it); "
            "pipe it on stdin or type it at the prompt"
        )
    kind = SecretKind(args.kind)
    with profile_store() as store:
        store.get(args.name)  # only for profiles that exist
    secrets = SecretStore()
    secrets.ensure_usable()  # before asking for the value, not after
    secrets.set(args.name, kind, _read_secret(args.name, kind))
    if args.json:
        print_json({"name": args.name, "kind": kind.value, "stored": True})
    else:
        print(f"Stored the {kind} of {args.name!r} in the {describe_backend(secrets.backend)} keyring.")
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    """`gpuws secret clear NAME`: remove a profile's secret from the keyring."""
    # The profile may already be gone: clearing an orphaned secret is still allowed.
    name = validate_name(args.name)
    kind = SecretKind(args.kind)
    cleared = SecretStore().clear(name, kind)
    if args.json:
        print_json({"name": name, "kind": kind.value, "cleared": cleared})
    else:
        print(f"Deleted the {kind} of {name!r}." if cleared else f"No {kind} was stored for {name!r}.")
    return 0
