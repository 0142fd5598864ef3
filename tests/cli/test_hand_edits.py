"""Issue #27, "A hand edit loses a host": each edit from the Found list, as a user makes it in
profiles.toml and then runs `gpuws hosts ...`. Nothing the user wrote is moved aside or dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.core import paths

GOOD = 'schema_version = 1\n\n[[hosts]]\nname = "good"\nhost = "good.example"\n'


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def profiles_file(text: str | bytes) -> Path:
    path = paths.config_dir() / "profiles.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return path


def listing(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    code, out, err = run(capsys, "hosts", "list", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert isinstance(doc, dict)
    return doc


def no_backups() -> bool:
    return list(paths.config_dir().glob("profiles.toml.corrupt-*")) == []


def test_a_misspelt_key_keeps_the_host_listed_with_a_warning_every_time(capsys: pytest.CaptureFixture[str]) -> None:
    # Found: `curency = "EUR"` made `alpha` vanish from the second command on, with the file moved aside.
    path = profiles_file(GOOD + '\n[[hosts]]\nname = "alpha"\nhost = "a.example"\ncurency = "EUR"  # mine\n')
    for _ in range(2):  # the second command still lists it and still says why
        code, out, err = run(capsys, "hosts", "list")
        assert code == 0
        assert [line.split()[0] for line in out.splitlines()[1:]] == ["alpha", "good"]
        assert f"{path}:10: curency: is not a known profile field" in err
        assert "did you mean 'currency'?" in err
    assert no_backups()
    # The key survives gpuws's next write, comment and all.
    assert run(capsys, "hosts", "add", "beta", "--host", "b.example")[0] == 0
    assert 'curency = "EUR"  # mine' in path.read_text()
    assert {h["name"] for h in listing(capsys)["hosts"]} == {"alpha", "beta", "good"}  # type: ignore[union-attr]


ALPHA = 'name = "alpha"\nhost = "a.example"\n'
BAD_VALUES = [
    (ALPHA + 'currency = "EURO"', "alpha", "currency"),
    (ALPHA + "currency = 5", "alpha", "currency"),
    (ALPHA + 'port = "22"', "alpha", "port"),  # a wrong type
    (ALPHA + "port = 70000", "alpha", "port"),
    (ALPHA + "price_per_hour = nan", "alpha", "price_per_hour"),
    (ALPHA + "price_per_hour = -1.0", "alpha", "price_per_hour"),
    (ALPHA + 'jump = "nowhere"', "alpha", "jump"),  # a missing jump host
    ('name = "GOOD"\nhost = "dup.example"', "GOOD", "name"),  # a duplicate name (ignoring case)
]


@pytest.mark.parametrize(("lines", "name", "key"), BAD_VALUES)
def test_a_wrong_value_marks_only_that_host_broken(
    capsys: pytest.CaptureFixture[str], lines: str, name: str, key: str
) -> None:
    # Found: a wrong value dropped the host and the next save rewrote the file without it; errors
    # named "host #N", never a line.
    table = f"\n[[hosts]]\n{lines}\n"
    path = profiles_file(GOOD + table)
    key_line = len(GOOD.splitlines()) + 3 + next(n for n, text in enumerate(lines.splitlines())
                                                 if text.startswith(key + " "))
    hosts = {h["name"]: h for h in listing(capsys)["hosts"]}  # type: ignore[union-attr]
    assert hosts["good"]["error"] is None
    error = hosts[name]["error"]
    assert (error["line"], error["key"]) == (key_line, key) and error["message"]
    # A command on it exits 2 naming file:line:key; the others work.
    code, _, err = run(capsys, "hosts", "show", name)
    assert code == 2 and f"{path}:{key_line}: {key}:" in err
    assert run(capsys, "hosts", "show", "good")[0] == 0
    # The next save keeps the broken table as the user wrote it.
    assert run(capsys, "hosts", "add", "beta", "--host", "b.example")[0] == 0
    assert table in path.read_text()
    assert no_backups()


def test_a_file_starting_with_a_utf8_bom_is_read_and_kept(capsys: pytest.CaptureFixture[str]) -> None:
    # Found: a file starting with a BOM (as Windows editors write) was refused whole.
    path = profiles_file(b"\xef\xbb\xbf" + GOOD.encode())
    assert [h["name"] for h in listing(capsys)["hosts"]] == ["good"]  # type: ignore[index]
    assert run(capsys, "hosts", "edit", "good", "--port", "2222")[0] == 0
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert [h["port"] for h in listing(capsys)["hosts"]] == [2222]  # type: ignore[index]


def test_a_file_cut_short_keeps_the_complete_hosts_before_the_cut_read_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Found: a file cut mid-table lost the complete profiles before the cut too.
    text = GOOD + '\n[[hosts]]\nname = "second"\nhost = "s.example"\n\n[[hosts]]\nname = "cut"\nhost = "c.exa'
    path = profiles_file(text)
    doc = listing(capsys)
    hosts = doc["hosts"]
    assert [h["name"] for h in hosts if h["error"] is None] == ["good", "second"]  # type: ignore[union-attr]
    # The cut one is listed broken, named, with the line where it breaks.
    assert [(h["name"], h["error"]["line"]) for h in hosts if h["error"]] == [("cut", 13)]  # type: ignore[union-attr]
    assert doc["read_only"]["line"] == 13  # type: ignore[index]
    code, _, err = run(capsys, "hosts", "add", "beta", "--host", "b.example")
    assert code != 0 and "read-only until the file is fixed" in err and f"{path}:13:" in err
    assert path.read_text() == text and no_backups()


def test_a_file_from_a_newer_gpuws_is_read_only_never_moved_or_overwritten(capsys: pytest.CaptureFixture[str]) -> None:
    # Found: schema_version = 99 was moved aside, and the next `hosts add` wrote a fresh file.
    text = GOOD.replace("schema_version = 1", "schema_version = 99") + "future_field = true\n"
    path = profiles_file(text)
    doc = listing(capsys)
    assert doc["read_only"]["key"] == "schema_version"  # type: ignore[index]
    assert "newer gpuws" in doc["read_only"]["message"]  # type: ignore[index]
    code, _, err = run(capsys, "hosts", "add", "beta", "--host", "b.example")
    assert code != 0 and "newer gpuws" in err
    assert path.read_text() == text and no_backups()


def test_a_file_that_is_not_toml_is_left_untouched_until_repair_is_asked_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = GOOD + "this line = is [ not toml\n"
    path = profiles_file(text)
    code, _, err = run(capsys, "hosts", "list")
    assert code == 0 and f"{path}:6:" in err and "not valid TOML" in err
    code, _, err = run(capsys, "hosts", "add", "beta", "--host", "b.example")
    assert code != 0 and "read-only" in err
    assert path.read_text() == text and no_backups()
    code, out, _ = run(capsys, "hosts", "repair")
    assert code == 0 and "Moved" in out
    (backup,) = paths.config_dir().glob("profiles.toml.corrupt-*")
    assert backup.read_text() == text
    assert run(capsys, "hosts", "add", "beta", "--host", "b.example")[0] == 0


def test_a_broken_host_can_be_removed(capsys: pytest.CaptureFixture[str]) -> None:
    path = profiles_file(GOOD + '\n# mine\n[[hosts]]\nname = "alpha"\nhost = "a.example"\nport = 70000\n')
    code, _, err = run(capsys, "hosts", "remove", "alpha")
    assert code == 0, err
    assert "alpha" not in path.read_text() and path.read_text().startswith(GOOD)
    assert [h["name"] for h in listing(capsys)["hosts"]] == ["good"]  # type: ignore[index]


@pytest.mark.parametrize("typed", [False, True])
def test_removing_the_last_host_then_adding_one_keeps_the_file_valid(
        capsys: pytest.CaptureFixture[str], typed: bool) -> None:
    """Add, remove, add wrote `hosts = [name = "x" ...]` (the new table inside the `hosts = []` the
    removal left): the file was read-only until repaired (issue 36, found while fuzzing)."""
    if typed:  # a user (or an older gpuws) left the empty inline array
        profiles_file("schema_version = 1\nhosts = []\n")
    else:
        assert run(capsys, "hosts", "add", "x", "--host", "127.0.0.1", "--user", "u")[0] == 0
        assert run(capsys, "hosts", "remove", "x")[0] == 0
    assert run(capsys, "hosts", "add", "x", "--host", "127.0.0.1", "--user", "u")[0] == 0
    assert run(capsys, "hosts", "add", "y", "--host", "127.0.0.2", "--user", "u")[0] == 0
    doc = listing(capsys)
    assert [h["name"] for h in doc["hosts"]] == ["x", "y"]  # type: ignore[index]
    text = (paths.config_dir() / "profiles.toml").read_text()
    assert "[[hosts]]" in text and "hosts = [" not in text and "schema_version = 1" in text
    code, _, err = run(capsys, "hosts", "list")
    assert code == 0 and "warning" not in err


def test_a_record_nested_500_deep_is_named_by_its_line_and_hides_no_other(capsys: pytest.CaptureFixture[str]) -> None:
    """tomllib recursed per level: the RecursionError named no line (issue 36 item 3, for TOML)."""
    good = '[[hosts]]\nname = "a"\nhost = "127.0.0.1"\nuser = "u"\n\n'
    deep = '[[hosts]]\nname = "b"\nhost = "127.0.0.1"\nuser = "u"\nnotes = ' + "[" * 500 + "]" * 500 + "\n\n"
    last = '[[hosts]]\nname = "c"\nhost = "127.0.0.1"\nuser = "u"\n'
    profiles_file("schema_version = 1\n\n" + good + deep + last)
    doc = listing(capsys)
    assert [h["name"] for h in doc["hosts"] if not h.get("error")] == ["a", "c"]  # type: ignore[index, union-attr]
    code, _, err = run(capsys, "hosts", "list")
    assert code == 0 and "profiles.toml:12" in err and "nested more than" in err and "Traceback" not in err
