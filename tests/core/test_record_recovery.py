"""Issue 36 item 4: one damaged record never hides its neighbours, and `repair` never drops them.

A damaged profiles.toml or fleets.toml is read record by record (cut at each `[[hosts]]` /
`[[fleets]]`): every complete record loads, each broken one is named with its line. `repair`
keeps every complete record in the user's own text and never rewrites a newer schema.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.core import paths
from gpuws.core.fleet.profiles import FleetStore
from gpuws.core.profiles import ProfileStore
from gpuws.core.recordfile import NewerFileRefused

# Four records as a user keeps them: comments, a sub-table, a key gpuws does not know.
RECORDS = [
    '[[hosts]]\nname = "alpha"  # the big one\nhost = "a.example"\nport = 2222\n',
    '[[hosts]]\nname = "beta"\nhost = "b.example"\ntags = ["x", "y"]\nnotes = "plain notes"\n\n'
    '[hosts.alerts]\ntemp_c = 80.0\n',
    '# my rig\n[[hosts]]\nname = "gamma"\nhost = "10.0.0.3"\nmy_own_key = "kept"\n',
    '[[hosts]]\nname = "delta"\nhost = "d.example"\nnotes = "last"\n',
]
PREAMBLE = "schema_version = 1\n\n"
NAMES = ["alpha", "beta", "gamma", "delta"]


def whole() -> str:
    return PREAMBLE + "\n".join(RECORDS)


def write(data: bytes) -> ProfileStore:
    store = ProfileStore()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_bytes(data)
    return store


def listed(store: ProfileStore) -> tuple[list[str], dict[str | None, int | None]]:
    """The valid names, and each broken record's name with its line."""
    valid = [p.name for p in store.load()]
    return valid, {b.name: b.problem.line for b in store.state.broken}


# -- the cases found, one by one, through `hosts list` as the user runs it ---------------------------

CORRUPTIONS = {
    # Each: how record `beta` is damaged; the line (of the whole file) named for it.
    "nul byte in notes": ('notes = "plain notes"', 'notes = "plain\x00notes"'),
    "latin-1 byte in notes": ('notes = "plain notes"', 'notes = "plain\udce9notes"'),
    "[hosts] for [[hosts]]": ('[[hosts]]\nname = "beta"', '[hosts]\nname = "beta"'),
    "duplicate key": ('tags = ["x", "y"]', 'tags = ["x", "y"]\ntags = ["z"]'),
    "garbage line": ('notes = "plain notes"', 'notes = "plain notes"\nthis is = = not toml'),
    "string left open": ('notes = "plain notes"', 'notes = """plain notes'),
}


def damaged(case: str, record: int = 1) -> bytes:
    old, new = CORRUPTIONS[case]
    if record != 1:  # the same damage on another record: its own line of the same kind
        old, new = _same_damage_for(record, case)
    records = list(RECORDS)
    assert old in records[record]
    records[record] = records[record].replace(old, new, 1)
    return (PREAMBLE + "\n".join(records)).encode("utf-8", errors="surrogateescape")


def _same_damage_for(record: int, case: str) -> tuple[str, str]:
    name = NAMES[record]
    line = f'name = "{name}"' + ("  # the big one" if record == 0 else "")
    damage = {
        "nul byte in notes": f'{line}\nnotes = "a\x00b"',
        "latin-1 byte in notes": f'{line}\nnotes = "a\udce9b"',
        "[hosts] for [[hosts]]": None,
        "duplicate key": f'{line}\nname = "{name}"',
        "garbage line": f"{line}\nthis is = = not toml",
        "string left open": f'{line}\nnotes = """open',
    }[case]
    if damage is None:
        return f'[[hosts]]\nname = "{name}"', f'[hosts]\nname = "{name}"'
    return line, damage


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_one_damaged_record_hides_none_of_its_neighbours(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    data = damaged(case)
    store = write(data)
    assert main(["hosts", "list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    valid = sorted(h["name"] for h in doc["hosts"] if h["error"] is None)
    assert valid == ["alpha", "delta", "gamma"]
    (broken,) = [h for h in doc["hosts"] if h["error"] is not None]
    assert broken["name"] == "beta"
    # Its line is one of beta's own lines (its header is the line before its name).
    lines = data.decode("utf-8", errors="replace").split("\n")
    name_line = lines.index('name = "beta"') + 1
    assert name_line - 1 <= broken["error"]["line"] <= name_line + 8
    assert doc["read_only"] is not None  # gpuws writes nothing into a damaged file
    assert store.path.read_bytes() == data


def test_a_file_cut_inside_a_table_header_keeps_every_record_before_it(capsys: pytest.CaptureFixture[str]) -> None:
    text = whole() + "\n[[ho"
    write(text.encode())
    assert main(["hosts", "list"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()[1:5]] == ["alpha", "beta", "delta", "gamma"]
    assert "No host profiles yet" not in out


# -- every byte offset, every record damaged in turn ---------------------------------------------------


def complete_at(cut: int) -> list[str]:
    """The records whose whole text (up to its last non-blank character) lies before `cut`."""
    done = []
    offset = len(PREAMBLE.encode())
    for name, record in zip(NAMES, RECORDS, strict=True):
        if offset + len(record.rstrip().encode()) <= cut:
            done.append(name)
        offset += len(record.encode()) + 1
    return done


def test_a_file_cut_at_any_byte_keeps_every_complete_record() -> None:
    data = whole().encode()
    assert complete_at(len(data)) == NAMES
    for cut in range(len(data) + 1):
        store = write(data[:cut])
        valid, broken = listed(store)
        missing = set(complete_at(cut)) - set(valid)
        assert not missing, f"cut at byte {cut} ({data[max(0, cut - 20):cut]!r}) hid {missing}"
        assert all(line is not None for line in broken.values()), f"cut at byte {cut}: a broken record with no line"


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_each_record_damaged_in_turn_costs_only_itself(case: str) -> None:
    for record, name in enumerate(NAMES):
        store = write(damaged(case, record))
        valid, broken = listed(store)
        assert sorted(valid) == sorted(set(NAMES) - {name}), f"{case} in {name}"
        assert list(broken) == [name], f"{case} in {name}"
        # repair keeps every other record, in the user's own text
        notice = store.repair()
        assert notice is not None
        again = ProfileStore()
        assert sorted(p.name for p in again.load()) == sorted(set(NAMES) - {name})
        assert again.state.read_only is None and again.state.broken == []
        if name != "gamma":
            assert 'my_own_key = "kept"' in again.path.read_text() and "# my rig" in again.path.read_text()
        if name != "alpha":
            assert "# the big one" in again.path.read_text()
        for backup in notice.backup_path.parent.glob("profiles.toml.corrupt-*"):
            backup.unlink()


# -- repair ---------------------------------------------------------------------------------------------


def test_repair_keeps_every_complete_record_of_a_damaged_file(capsys: pytest.CaptureFixture[str]) -> None:
    data = damaged("garbage line")
    store = write(data)
    assert main(["hosts", "repair"]) == 0
    assert "kept the 3 valid profile(s)" in capsys.readouterr().out
    (backup,) = paths.config_dir().glob("profiles.toml.corrupt-*")
    assert backup.read_bytes() == data
    assert sorted(p.name for p in store.load()) == ["alpha", "delta", "gamma"]
    text = store.path.read_text()
    assert "# the big one" in text and 'my_own_key = "kept"' in text and "# my rig" in text
    assert store.state.read_only is None  # writable again
    assert main(["hosts", "add", "epsilon", "--host", "e.example"]) == 0


@pytest.mark.parametrize("damage", ["", "this is = = not toml\n"])
def test_repair_never_rewrites_a_file_from_a_newer_gpuws(damage: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Found: `hosts repair` on a healthy `schema_version = 99` file rewrote it as version 1.
    data = (whole().replace("schema_version = 1", "schema_version = 99") + damage).encode()
    store = write(data)
    with pytest.raises(NewerFileRefused, match="a newer gpuws wrote"):
        store.repair()
    assert main(["hosts", "repair"]) != 0
    assert "a newer gpuws wrote" in capsys.readouterr().err
    assert store.path.read_bytes() == data
    assert list(paths.config_dir().glob("profiles.toml.corrupt-*")) == []


def test_a_newer_schema_is_known_even_when_its_first_lines_are_damaged() -> None:
    data = ("garbage = = here\nschema_version = 99\n\n" + "\n".join(RECORDS)).encode()
    store = write(data)
    with pytest.raises(NewerFileRefused):
        store.repair()
    assert store.path.read_bytes() == data


# -- fleets.toml: the same reader -------------------------------------------------------------------------


def test_a_damaged_fleet_hides_none_of_the_other_fleets(tmp_path: Path) -> None:
    fleets = [f'[[fleets]]\nname = "{n}"\nprometheus = "http://{n}.example:9090"\n' for n in ("one", "two", "three")]
    fleets[1] = fleets[1].replace('name = "two"', 'name = "two"\nname = "again"')
    path = tmp_path / "fleets.toml"
    path.write_bytes(("schema_version = 1\n\n" + "\n".join(fleets) + "\n[fleets").encode())
    store = FleetStore(path)
    assert [f.name for f in store.load()] == ["one", "three"]
    assert [(b.name, b.problem.line) for b in store.state.broken] == [("two", 9), (None, 16)]
    assert store.repair() is not None
    assert [f.name for f in FleetStore(path).load()] == ["one", "three"]
