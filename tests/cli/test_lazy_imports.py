"""`gpuws` starts quickly: the commands that need no host import no Qt, SSH, keyring or numpy."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuws.cli import main as cli_main

HEAVY = ("PySide6", "asyncssh", "paramiko", "numpy")
# What a command that only reads (or only prints its version) never uses (#35): the profile writer's
# TOML libraries, the whole error table (it is the help text's and a failing command's), the
# sanitiser (only for an argument that must be escaped), close-match suggestions.
NOT_FOR_READING = ("tomlkit", "tomli_w", "gpuws.app.errors", "difflib")
NOT_FOR_VERSION = (*NOT_FOR_READING, "gpuws.core.terminal", "gpuws.core.models", "dataclasses")
# Importing gpuws.cli.main and running a quick command, then listing which heavy packages came in.
_PROBE = """
import json, sys
argv = json.loads(sys.argv[1])
if argv is not None:
    from gpuws.cli.main import main
    try:
        main(argv)
    except SystemExit:
        pass
else:
    import gpuws.cli.main
heavy = json.loads(sys.argv[2])
print("\\nLOADED=" + json.dumps(sorted(m for m in heavy + ["keyring", "filelock"] if m in sys.modules)))
print("\\nALL=" + json.dumps(sorted(sys.modules)))
"""


def _loaded(argv: list[str] | None, tmp_path: Path) -> list[str]:
    env = {"GPUWS_CONFIG_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(list(HEAVY))],
        capture_output=True, text=True, env=env, check=True, timeout=60,
    )
    line = result.stdout.rsplit("LOADED=", 1)[1].split("\nALL=")[0]
    return list(json.loads(line))


def _all_loaded(argv: list[str], tmp_path: Path) -> set[str]:
    env = {"GPUWS_CONFIG_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(argv), json.dumps(list(HEAVY))],
        capture_output=True, text=True, env=env, check=True, timeout=60,
    )
    return set(json.loads(result.stdout.rsplit("ALL=", 1)[1]))


@pytest.mark.parametrize(("argv", "unused"), [
    (["--version"], NOT_FOR_VERSION),
    (["hosts", "list", "--json"], NOT_FOR_READING),
    (["hosts", "list"], NOT_FOR_READING),
])
def test_quick_commands_leave_out_what_they_do_not_use(argv: list[str], unused: tuple[str, ...],
                                                       tmp_path: Path) -> None:
    """#35: `hosts list` was 3.8-4.3x a bare interpreter and `--version` 2.8x: the writer's TOML,
    the whole error table and the sanitiser came in on paths that use none of them."""
    (tmp_path / "profiles.toml").write_text('[hosts.gpu-a]\nhost = "gpu-a.example.com"\n')
    loaded = _all_loaded(argv, tmp_path)
    assert sorted(loaded & {*HEAVY, *unused}) == []


def test_help_still_lists_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuws.app.errors import EXIT_STATUS_TABLE

    with pytest.raises(SystemExit):
        cli_main.main(["--help"])
    assert EXIT_STATUS_TABLE in capsys.readouterr().out


def test_importing_the_cli_pulls_in_nothing_heavy(tmp_path: Path) -> None:
    assert _loaded(None, tmp_path) == []


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["hosts", "list", "--json"], ["hosts", "--help"],
                                  ["fleet", "list", "--json"]])
def test_quick_commands_import_no_qt_ssh_keyring_or_numpy(argv: list[str], tmp_path: Path) -> None:
    # keyring only when a secret is touched; filelock only when profiles are written.
    assert _loaded(argv, tmp_path) == []


def _real_help() -> dict[str, str]:
    parser = cli_main.build_parser()  # every module registered, as before
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {choice.dest: str(choice.help) for choice in sub._choices_actions}


def test_the_lazy_table_matches_what_the_modules_register() -> None:
    real = _real_help()
    for command, (_module, text) in cli_main.LAZY_COMMANDS.items():
        assert real.get(command) == text, command
    lazy = cli_main.build_parser(["--help"])
    sub = next(a for a in lazy._actions if isinstance(a, argparse._SubParsersAction))
    assert {c.dest: str(c.help) for c in sub._choices_actions} == real  # `gpuws --help` lists the same


@pytest.mark.parametrize("command", sorted(cli_main.LAZY_COMMANDS))
def test_each_command_gets_its_own_module_and_handler(command: str) -> None:
    parser = cli_main.build_parser([command, "--help"])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert sub.choices[command].add_help  # the real parser, not the --help listing's stand-in


def test_an_option_value_is_not_taken_for_the_command() -> None:
    assert cli_main._command_in(["--screenshot", "hosts", "--demo"]) is None
    assert cli_main._command_in(["--demo", "watch", "x"]) == "watch"


def test_a_fleet_without_via_loads_no_ssh_and_no_httpx_cli(tmp_path: Path) -> None:
    # A fleet is read over HTTP: SSH (asyncssh, cryptography) only for one reached `--via` a host,
    # and httpx without its own command-line client (rich, click), which gpuws never runs.
    code = ("import sys, gpuws.app.fleet, gpuws.remote.prometheus; "
            "print(sorted(m for m in ('asyncssh', 'paramiko', 'cryptography', 'rich', 'click', 'PySide6', "
            "'keyring', 'httpx') if m in sys.modules))")
    env = {"GPUWS_CONFIG_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                         timeout=60)
    assert out.stdout.strip() == "['httpx']"


def test_watch_streams_without_numpy_or_qt(tmp_path: Path) -> None:
    # issue 28: numpy (the telemetry store's, ~15 MiB) came in with the Workspace's store, the agent
    # decoder's stored rows and the exit-status table's Prometheus errors, though watch keeps no
    # history; it was a fifth of the peak RSS of `gpuws watch` against a flooding host.
    loaded = _loaded(["watch", "demo", "--count", "1", "--json"], tmp_path)
    assert "numpy" not in loaded and "PySide6" not in loaded
    assert "asyncssh" in loaded  # the samples came over SSH, through the agent decoder


# A profiles file as users have them (no problem to report): the clean read's path.
CLEAN = ('schema_version = 1\n\n[[hosts]]\nname = "bastion"\nhost = "bastion.example.com"\n\n'
         '[[hosts]]\nname = "gpu"\nhost = "10.0.3.17"\nport = 2222\nuser = "ml"\ntags = ["train"]\n')
# What a clean listing never needs (#35, the last pass): argparse (its line is parsed as known) and the
# parsers of other commands and actions,
# shutil (bz2, lzma) for a terminal width nothing lays out, platformdirs (tempfile, random) for a
# directory XDG names, locale (argparse's translation lookup, once per text of each parser built),
# the record file's problem types, and the jump parser for profiles without a jump host.
NOT_FOR_A_CLEAN_LISTING = (
    "gpuws.cli.commands.secret", "gpuws.cli.commands.session", "gpuws.cli.commands.fleet",
    "argparse", "shutil", "tempfile", "platformdirs", "locale", "gpuws.core.recordproblems", "gpuws.core.jumps",
)


@pytest.mark.parametrize("argv", [["hosts", "list"], ["hosts", "list", "--json"]])
def test_a_clean_listing_leaves_out_what_it_does_not_use(argv: list[str], tmp_path: Path) -> None:
    (tmp_path / "profiles.toml").write_text(CLEAN)
    loaded = _all_loaded(argv, tmp_path)
    assert sorted(loaded & {*HEAVY, *NOT_FOR_READING, *NOT_FOR_A_CLEAN_LISTING}) == []


def _parsers_built(argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    built: list[str] = []
    real = argparse.ArgumentParser.__init__

    def counting(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        real(self, *args, **kwargs)  # type: ignore[arg-type]
        built.append(self.prog)

    monkeypatch.setattr(argparse.ArgumentParser, "__init__", counting)
    monkeypatch.setenv("GPUWS_CONFIG_DIR", str(tmp_path))
    (tmp_path / "profiles.toml").write_text(CLEAN)
    assert cli_main.main(argv) == 0
    return built


def test_a_command_builds_the_parsers_of_its_own_action_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """#35: `hosts list` built 30 parsers (each command listed, each hosts action) to run one."""
    built = _parsers_built(["hosts", "show", "gpu", "--json"], monkeypatch, tmp_path)
    assert json.loads(capsys.readouterr().out)["name"] == "gpu"
    # and the parent parser that holds --json (named after the program running the test)
    assert sorted(p for p in built if p.startswith("gpuws")) == ["gpuws", "gpuws hosts", "gpuws hosts show"]
    assert len(built) == 4


def test_hosts_list_builds_no_parser(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert _parsers_built(["hosts", "list", "--json"], monkeypatch, tmp_path) == []
    assert [h["name"] for h in json.loads(capsys.readouterr().out)["hosts"]] == ["bastion", "gpu"]


@pytest.mark.parametrize("line", sorted(cli_main.PLAIN_LINES))
def test_a_plain_line_is_parsed_as_argparse_parses_it(line: tuple[str, ...]) -> None:
    mine = vars(cli_main._parse(list(line)))
    theirs = vars(cli_main.build_parser(list(line)).parse_args(list(line)))
    assert mine.pop("handler") is theirs.pop("handler").__wrapped__
    assert mine == theirs


# Lines the quick parser takes, and lines it must hand to the whole parser (errors, help, options
# before the command, abbreviations): each parsed (or refused) exactly as the whole parser does.
LINES = [
    ["hosts", "show", "gpu"], ["hosts", "add", "n", "--host", "h.example", "--port", "2200", "--tag", "a"],
    ["hosts", "edit", "n", "--budget-no-stop", "--price-per-hour", ""], ["hosts", "list", "--js"],
    ["hosts", "import-ssh-config", "--dry-run"], ["secret", "set", "gpu", "password"], ["fleet", "list"],
    ["cost", "--json"], ["--demo", "hosts", "list"], ["--scr", "hosts", "list"], ["hosts", "--", "list"],
    ["hosts", "lis"], ["hosts", "list", "extra"], ["hosts", "add", "n"], ["hosts", "show"], ["watch"],
    ["hosts", "add", "n", "--host", "h", "--port", "x\x1b[31m"], ["bogus"], ["hosts", "list", "--bogus"],
]


@pytest.mark.parametrize("line", LINES, ids=[" ".join(line) for line in LINES])
def test_the_quick_parser_parses_and_refuses_as_the_whole_one(line: list[str],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    def parse(how: object) -> tuple[object, str]:
        try:
            args = how()  # type: ignore[operator]
        except SystemExit as exc:
            return exc.code, capsys.readouterr().err
        found = vars(args)
        handler = found.pop("handler", None)
        return ({**found, "handler": getattr(handler, "__wrapped__", handler)}, capsys.readouterr().err)

    assert parse(lambda: cli_main._parse(line)) == parse(lambda: cli_main.build_parser(line).parse_args(line))
