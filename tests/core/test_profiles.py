"""The profile store: round trips, atomic writes, damaged files kept read-only, repair and concurrent writers."""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from gpuws.core import paths
from gpuws.core.errors import RefusedInput, ValidationError
from gpuws.core.models import AlertThresholds, AuthMethod, HostProfile, ProviderInfo
from gpuws.core.profiles import ProfileExists, ProfileNotFound, ProfileStore
from gpuws.core.recordfile import ReadOnlyFile

REPO = Path(__file__).resolve().parents[2]


def full_profile(key: Path) -> HostProfile:
    return HostProfile(
        name="a100-box",
        host="2001:db8::7",
        port=2222,
        user="ubuntu",
        auth=AuthMethod.KEY,
        key_path=str(key),
        provider=ProviderInfo(kind="aws", instance_id="i-0abc", region="us-east-1",
                              commands={"stop": ["aws", "ec2", "stop-instances"]}),
        slice_profile="7x1g.10gb",
        price_per_hour=3.25,
        slice_prices={"1g.10gb": 0.5},
        tags=["a100", "team-x"],
        notes='multi\nline "notes"',
        alerts=AlertThresholds(mem_used_pct=80.0, idle_util_pct=3.0, idle_minutes=30.0, temp_c=85.0),
        budget=100.0,
    )


def test_default_path_is_in_the_config_dir() -> None:
    assert ProfileStore().path == paths.config_dir() / "profiles.toml"


def test_every_field_round_trips_through_toml(tmp_path: Path) -> None:
    key = tmp_path / "id_ed25519"
    key.write_text("k")
    store = ProfileStore()
    profile = full_profile(key)
    store.add(profile)
    assert ProfileStore().get("a100-box") == profile
    doc = tomllib.loads(store.path.read_text())
    assert doc["schema_version"] == 1
    assert doc["hosts"][0]["provider"]["kind"] == "aws"
    assert store.state.notices() == []


def test_load_is_sorted_and_empty_without_a_file() -> None:
    store = ProfileStore()
    assert store.load() == []
    for name in ("zeta", "Alpha", "mid"):
        store.add(HostProfile(name=name, host="h.example"))
    assert [p.name for p in store.load()] == ["Alpha", "mid", "zeta"]


def test_names_are_unique_ignoring_case() -> None:
    store = ProfileStore()
    store.add(HostProfile(name="Box", host="h.example"))
    with pytest.raises(ProfileExists):
        store.add(HostProfile(name="box", host="other.example"))
    with pytest.raises(ProfileNotFound):
        store.get("box")


def test_add_refuses_invalid_profiles_and_writes_nothing() -> None:
    store = ProfileStore()
    with pytest.raises(ValidationError) as err:
        store.add(HostProfile(name="x", host="-oProxyCommand=x"))
    assert err.value.field == "host"
    assert not store.path.exists()
    with pytest.raises(ValidationError) as err:
        store.add(HostProfile(name="x", host="h.example", jump="missing"))
    assert err.value.field == "jump"


def test_update_renames_and_repoints_jump_hosts() -> None:
    store = ProfileStore()
    store.add(HostProfile(name="bastion", host="b.example"))
    store.add(HostProfile(name="gpu", host="10.0.0.2", jump="bastion"))
    store.update(HostProfile(name="gateway", host="b.example", port=2200), old_name="bastion")
    assert store.get("gpu").jump == "gateway"
    assert store.get("gateway").port == 2200
    with pytest.raises(ProfileNotFound):
        store.get("bastion")
    with pytest.raises(ValidationError, match="cycle"):
        store.update(HostProfile(name="gateway", host="b.example", jump="gpu"))


def test_remove_refuses_a_profile_still_used_as_jump_host() -> None:
    store = ProfileStore()
    store.add(HostProfile(name="bastion", host="b.example"))
    store.add(HostProfile(name="gpu", host="10.0.0.2", jump="bastion"))
    with pytest.raises(ValidationError, match="jump host of 'gpu'"):
        store.remove("bastion")
    store.remove("gpu")
    store.remove("bastion")
    assert store.load() == []
    with pytest.raises(ProfileNotFound):
        store.remove("bastion")


def test_writes_are_atomic_and_private() -> None:
    store = ProfileStore()
    store.add(HostProfile(name="a", host="h.example"))
    store.add(HostProfile(name="b", host="h.example"))
    leftovers = [p.name for p in store.path.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600


def test_a_failed_write_keeps_the_old_file(monkeypatch: pytest.MonkeyPatch) -> None:
    store = ProfileStore()
    store.add(HostProfile(name="a", host="h.example"))
    before = store.path.read_bytes()

    def disk_full(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(Exception, match="No space left"):
        store.add(HostProfile(name="b", host="h.example"))
    monkeypatch.undo()
    assert store.path.read_bytes() == before
    assert [p.name for p in store.path.parent.iterdir() if p.name.endswith(".tmp")] == []


def backups(store: ProfileStore) -> list[Path]:
    return sorted(store.path.parent.glob("profiles.toml.corrupt-*"))


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"schema_version = 1\n[[hosts]\nname = 'x'", "not valid TOML"),
        (b"\xff\xfe garbage", "not UTF-8"),
        (b"schema_version = 'one'\n", "must be a whole number"),
        (b"schema_version = 1\nhosts = 'nope'\n", "must be a list"),
    ],
)
def test_an_unreadable_file_is_left_in_place_and_read_only(content: bytes, expected: str) -> None:
    store = ProfileStore()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_bytes(content)
    assert store.load() == []
    problem = store.state.read_only
    assert problem is not None and expected in problem.message
    with pytest.raises(ReadOnlyFile, match="read-only until the file is fixed"):
        store.add(HostProfile(name="fresh", host="h.example"))
    assert store.path.read_bytes() == content  # never moved aside, never rewritten
    assert backups(store) == []
    # Only on request: `repair` moves it aside (the original bytes kept) and the store works again.
    notice = store.repair()
    assert notice is not None and notice.backup_path.read_bytes() == content
    assert notice.backup_path.name.startswith("profiles.toml.corrupt-")
    store.add(HostProfile(name="fresh", host="h.example"))
    assert [p.name for p in ProfileStore().load()] == ["fresh"]


def test_bad_entries_are_listed_broken_and_the_file_left_as_it_is() -> None:
    store = ProfileStore()
    original = b"""schema_version = 1
[[hosts]]
name = "good"
host = "good.example"
[[hosts]]
name = "badport"
host = "h.example"
port = "twenty-two"
[[hosts]]
name = "evil"
host = "$(reboot)"
[[hosts]]
name = "typo"
host = "h.example"
prot = 22
[[hosts]]
name = "GOOD"
host = "dup.example"
[[hosts]]
name = "needs-evil"
host = "n.example"
jump = "evil"
[[hosts]]
name = "also-good"
host = "10.0.0.1"
jump = "good"
"""
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_bytes(original)
    assert [p.name for p in store.load()] == ["also-good", "good", "typo"]
    broken = {b.name: (b.problem.line, b.problem.key) for b in store.state.broken}
    assert broken == {"badport": (8, "port"), "evil": (11, "host"), "GOOD": (17, "name"),
                      "needs-evil": (22, "jump")}
    assert [(w.line, w.key) for w in store.state.warnings] == [(15, "prot")]
    assert "did you mean 'port'" in store.state.warnings[0].message
    assert store.path.read_bytes() == original
    assert backups(store) == []
    with pytest.raises(RefusedInput, match=r"profiles.toml:8: port:"):
        store.get("badport")


def test_backups_never_overwrite_each_other() -> None:
    store = ProfileStore()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    seen = set()
    for attempt in range(3):
        store.path.write_text(f"broken {attempt} [")
        notice = store.repair()
        assert notice is not None
        seen.add(notice.backup_path)
    assert len(seen) == 3
    assert sorted(p.read_text() for p in backups(store)) == [f"broken {i} [" for i in range(3)]
    assert any(p.name.endswith("-1") for p in seen)


WRITER = """
import sys
from gpuws.core.models import HostProfile
from gpuws.core.profiles import ProfileStore
store = ProfileStore()
for i in range(20):
    store.add(HostProfile(name=f"{sys.argv[1]}-{i}", host="h.example"))
"""


def test_two_processes_saving_at_once_lose_nothing() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, who], env=env, stderr=subprocess.PIPE)
        for who in ("first", "second")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    names = {p.name for p in ProfileStore().load()}
    assert names == {f"{who}-{i}" for who in ("first", "second") for i in range(20)}


def test_a_save_changes_only_what_changed_and_keeps_the_users_text() -> None:
    store = ProfileStore()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    original = ('schema_version = 1\n# my rigs\n[[hosts]]\nname = "a"  # the big one\nhost = "h"\n'
                'provider = { kind = "aws", zone_hint = "x" }\nlater = 1\n')
    store.path.write_text(original)
    profile = store.get("a")
    store.update(dataclasses.replace(profile, price_per_hour=2.5,
                                     alerts=dataclasses.replace(profile.alerts, temp_c=70.0)))
    text = store.path.read_text()
    assert text.startswith('schema_version = 1\n# my rigs\n[[hosts]]\nname = "a"  # the big one\nhost = "h"\n')
    assert 'zone_hint = "x"' in text and "later = 1" in text and "price_per_hour = 2.5" in text
    assert tomllib.loads(text)["hosts"][0]["alerts"] == {"temp_c": 70.0}  # not every default written out
    assert store.get("a").price_per_hour == 2.5


def test_a_string_left_open_costs_only_its_own_record() -> None:
    store = ProfileStore()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    text = ('schema_version = 1\n[[hosts]]\nname = "a"\nhost = "h"\n[[hosts]]\nname = "b"\nhost = "h"\n'
            'notes = """never closed\n[[hosts]]\nname = "c"\nhost = "x"\n')
    store.path.write_text(text)
    # Read record by record (issue 36): `b` is broken, `c` after it is complete and loads.
    assert [p.name for p in store.load()] == ["a", "c"]
    assert [(b.name, b.problem.line) for b in store.state.broken] == [("b", 8)]
    assert store.state.read_only is not None and "not valid TOML" in store.state.read_only.message
    assert store.path.read_text() == text


def test_each_added_profile_starts_after_a_blank_line() -> None:
    store = ProfileStore()
    for name in ("alpha", "beta", "gamma"):
        store.add(HostProfile(name=name, host=f"{name}.example"))
    lines = store.path.read_text(encoding="utf-8").splitlines()
    headers = [i for i, line in enumerate(lines) if line == "[[hosts]]"]
    assert len(headers) == 3
    assert all(lines[i - 1] == "" for i in headers), "a hand editor meets tables run together"
