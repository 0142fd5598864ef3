"""`gpuws hosts edit`: every setting has a command (#27), and `--editor` as crontab -e / kubectl edit."""

from __future__ import annotations

import json
import os
import pty
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.core.profiles import ProfileStore


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_every_setting_has_a_flag_on_add_and_edit(capsys: pytest.CaptureFixture[str]) -> None:
    # Found: currency, budgets and slice prices were only reachable by editing TOML.
    code, out, err = run(capsys, "hosts", "add", "rig", "--host", "rig.example", "--currency", "usd",
                         "--budget-monthly", "300", "--slice-price", "1g.10gb=0.50", "--json")
    assert code == 0, err
    added = json.loads(out)
    assert (added["currency"], added["budget"], added["slice_prices"]) == ("USD", 300.0, {"1g.10gb": 0.5})
    code, out, err = run(capsys, "hosts", "edit", "rig", "--currency", "EUR", "--budget-daily", "50",
                         "--budget-stop", "--slice-price", "full=3.20", "--slice-price", "1g.10gb=",
                         "--port", "2222", "--tag", "a100", "--region", "eu-west-1")
    assert code == 0, err
    saved = ProfileStore().get("rig")
    assert (saved.currency, saved.budget_daily, saved.budget, saved.budget_stop) == ("EUR", 50.0, 300.0, True)
    assert saved.slice_prices == {"full": 3.2}
    assert (saved.port, saved.tags, saved.provider.region, saved.host) == (2222, ["a100"], "eu-west-1", "rig.example")
    code, out, _ = run(capsys, "cost", "--json")
    doc = json.loads(out)
    assert doc["hosts"][0]["currency"] == "EUR" and set(doc["totals"]) == {"EUR"}
    # '' clears an optional setting; --no-budget-stop turns it off.
    assert run(capsys, "hosts", "edit", "rig", "--budget-monthly", "", "--no-budget-stop")[0] == 0
    assert (ProfileStore().get("rig").budget, ProfileStore().get("rig").budget_stop) == (None, False)
    code, _, err = run(capsys, "hosts", "edit", "rig", "--currency", "EURO")
    assert code == 2 and err.startswith("gpuws: error: currency:")
    code, _, err = run(capsys, "hosts", "edit", "rig", "--slice-price", "nonsense")
    assert code == 2 and "PROFILE=PRICE" in err
    code, _, err = run(capsys, "hosts", "edit", "ghost", "--port", "22")
    assert code == 2 and "no host profile named 'ghost'" in err
    assert run(capsys, "hosts", "edit", "rig")[0] == 2  # nothing to change


EDITOR = r'''
import pathlib, sys
path = pathlib.Path(sys.argv[2])  # $EDITOR is "python editor.py TURNS", the file comes last
turns = pathlib.Path(sys.argv[1])
calls = turns.read_text().split("\n---\n")
n = int((turns.parent / "count").read_text())
(turns.parent / "count").write_text(str(n + 1))
(turns.parent / f"shown-{n}").write_text(path.read_text())
step = calls[min(n, len(calls) - 1)]
if n >= 30:  # an editor relaunched without end: give up here, so the test ends either way
    sys.exit(9)
if step == "KEEP":
    pass
elif step.startswith("APPEND "):  # adds text each time: never the same save twice
    path.write_text(path.read_text() + step.removeprefix("APPEND ") + f"  # {n}\n")
elif step.startswith("GROW "):  # a save of that many bytes
    path.write_text(path.read_text() + "# " + "x" * int(step.removeprefix("GROW ")) + "\n")
else:
    text = path.read_text()
    old, new = step.split(" => ")
    path.write_text(text.replace(old, new))
'''


def scripted_editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *steps: str) -> Path:
    """$EDITOR is a script that makes one replacement per call ('old => new') or saves unchanged ('KEEP')."""
    script = tmp_path / "editor.py"
    script.write_text(EDITOR)
    turns = tmp_path / "turns"
    turns.write_text("\n---\n".join(steps))
    (tmp_path / "count").write_text("0")
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script} {turns}")
    return tmp_path


@pytest.fixture
def terminal_stdin() -> Iterator[None]:
    """fd 0 is a real terminal (a pty) for the test: someone could fix an invalid save."""
    master, slave = pty.openpty()
    saved = os.dup(0)
    os.dup2(slave, 0)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        for fd in (saved, slave, master):
            os.close(fd)


@pytest.fixture
def no_terminal_stdin() -> Iterator[None]:
    """fd 0 is /dev/null, as under cron or `< /dev/null`."""
    null = os.open(os.devnull, os.O_RDONLY)
    saved = os.dup(0)
    os.dup2(null, 0)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(null)


def launches(seen: Path) -> int:
    return int((seen / "count").read_text())


@pytest.mark.usefixtures("terminal_stdin")
def test_editor_reopens_with_the_error_until_valid(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert run(capsys, "hosts", "add", "rig", "--host", "rig.example")[0] == 0
    assert run(capsys, "hosts", "add", "other", "--host", "o.example")[0] == 0
    seen = scripted_editor(tmp_path, monkeypatch, 'port = 22 => port = 70000\nmy_note = "kept"',
                           "port = 70000 => port = 2200")
    code, _, err = run(capsys, "hosts", "edit", "rig", "--editor")
    assert code == 0, err
    first, second = (seen / "shown-0").read_text(), (seen / "shown-1").read_text()
    assert 'name = "rig"' in first and "other" not in first  # the profile's table alone
    error = next(line for line in second.splitlines() if "ERROR" in line)
    port_line = next(n for n, line in enumerate(second.splitlines(), start=1) if line.startswith("port ="))
    assert f"line {port_line}: port:" in error  # the line as the user sees the file
    assert "my_note: is not a known profile field" in err
    saved = ProfileStore().get("rig")
    assert saved.port == 2200
    doc = tomllib.loads(ProfileStore().path.read_text())
    assert next(h for h in doc["hosts"] if h["name"] == "rig")["my_note"] == "kept"


@pytest.mark.usefixtures("terminal_stdin")
def test_editor_abandoned_after_an_error_changes_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    assert run(capsys, "hosts", "add", "rig", "--host", "rig.example")[0] == 0
    before = ProfileStore().path.read_bytes()
    scripted_editor(tmp_path, monkeypatch, 'host = "rig.example" => host = "$(reboot)"', "KEEP")
    code, _, err = run(capsys, "hosts", "edit", "rig", "--editor")
    assert code == 2 and "edit cancelled" in err and "host:" in err
    assert ProfileStore().path.read_bytes() == before


def test_editor_fixes_a_broken_profile(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = ProfileStore().path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('schema_version = 1\n[[hosts]]\nname = "rig"\nhost = "rig.example"\ncurrency = "EURO"\n')
    assert run(capsys, "hosts", "edit", "rig", "--currency", "EUR")[0] == 2  # flags need a valid profile
    scripted_editor(tmp_path, monkeypatch, 'currency = "EURO" => currency = "EUR"')
    code, _, err = run(capsys, "hosts", "edit", "rig", "--editor")
    assert code == 0, err
    assert ProfileStore().get("rig").currency == "EUR"
    assert not [name for name in os.listdir(path.parent) if "corrupt" in name]


# -- issue 36 item 5: bounded -------------------------------------------------------------------------


@pytest.mark.usefixtures("terminal_stdin")
def test_an_editor_that_keeps_saving_invalid_toml_is_stopped_after_three_saves(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Found: relaunched about 100 times a second without end.
    assert run(capsys, "hosts", "add", "rig", "--host", "rig.example")[0] == 0
    before = ProfileStore().path.read_bytes()
    seen = scripted_editor(tmp_path, monkeypatch, "APPEND this = = not toml")
    code, _, err = run(capsys, "hosts", "edit", "rig", "--editor")
    assert (code, launches(seen)) == (2, 3)
    assert "3 invalid saves in a row" in err and "not valid TOML" in err and "nothing changed" in err
    assert ProfileStore().path.read_bytes() == before


@pytest.mark.usefixtures("no_terminal_stdin")
def test_without_a_terminal_an_invalid_save_ends_the_edit_at_once(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Found: 3,030 launches in 30 s with stdin from /dev/null.
    assert run(capsys, "hosts", "add", "rig", "--host", "rig.example")[0] == 0
    seen = scripted_editor(tmp_path, monkeypatch, "APPEND this = = not toml")
    code, _, err = run(capsys, "hosts", "edit", "rig", "--editor")
    assert (code, launches(seen)) == (2, 1)
    assert "stdin is not a terminal" in err
    # A valid save needs no terminal.
    seen = scripted_editor(tmp_path, monkeypatch, "port = 22 => port = 2200")
    assert run(capsys, "hosts", "edit", "rig", "--editor")[0] == 0
    assert ProfileStore().get("rig").port == 2200


@pytest.mark.usefixtures("terminal_stdin")
def test_an_oversized_save_is_refused_by_its_size_before_it_is_read(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Found: a 50 MB edit took 15.5 s and 317 MB before it was refused.
    assert run(capsys, "hosts", "add", "rig", "--host", "rig.example")[0] == 0
    before = ProfileStore().path.read_bytes()
    seen = scripted_editor(tmp_path, monkeypatch, f"GROW {5 * 1024 * 1024}")
    code, _, err = run(capsys, "hosts", "edit", "rig", "--editor")
    assert (code, launches(seen)) == (2, 1)
    assert "more than the 1048576 allowed" in err and "nothing changed" in err
    assert ProfileStore().path.read_bytes() == before


@pytest.mark.usefixtures("terminal_stdin")
def test_a_hosts_table_typed_in_the_editor_is_refused_not_nested(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Found: saved as [[hosts.hosts]] with only a warning.
    assert run(capsys, "hosts", "add", "rig", "--host", "rig.example")[0] == 0
    before = ProfileStore().path.read_bytes()
    seen = scripted_editor(tmp_path, monkeypatch, 'APPEND [[hosts]]\nname = "other"\nhost = "o.example"', "KEEP")
    code, _, err = run(capsys, "hosts", "edit", "rig", "--editor")
    assert code == 2 and "[[hosts]] is a table a profile does not have" in err
    second = (seen / "shown-1").read_text().splitlines()
    error = next(line for line in second if "ERROR" in line)
    header = next(n for n, line in enumerate(second, start=1) if line.startswith("[[hosts]]"))
    assert f"line {header}: hosts:" in error
    assert ProfileStore().path.read_bytes() == before
    assert "hosts.hosts" not in ProfileStore().path.read_text()
    # A nested table it does not know either, under one it knows.
    seen = scripted_editor(tmp_path, monkeypatch, "APPEND [alerts.extra]\nx = 1", "KEEP")
    code, _, err = run(capsys, "hosts", "edit", "rig", "--editor")
    assert code == 2 and "[alerts.extra] is a table a profile does not have" in err
    assert ProfileStore().path.read_bytes() == before
