"""Fleet profiles in fleets.toml: validation, atomic saves, recovery of a damaged file."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuws.core.errors import ValidationError
from gpuws.core.fleet.profiles import (
    FleetAuth,
    FleetExists,
    FleetNotFound,
    FleetProfile,
    FleetStore,
    normalize_selector,
    parse_selector,
    validate_url,
)
from gpuws.core.recordfile import ReadOnlyFile


def test_add_list_get_remove(tmp_path: Path) -> None:
    store = FleetStore(tmp_path / "fleets.toml")
    store.add(FleetProfile("b", "http://prom:9090/", selector='{cluster="x"}'))
    store.add(FleetProfile("a", "https://thanos.example/prom", via="bastion", auth=FleetAuth.BASIC, user="me"))
    assert [f.name for f in FleetStore(tmp_path / "fleets.toml").load()] == ["a", "b"]
    b = store.get("b")
    assert b.prometheus == "http://prom:9090" and b.selector == 'cluster="x"'
    with pytest.raises(FleetExists):
        store.add(FleetProfile("B", "http://other:9090"))
    store.remove("b")
    with pytest.raises(FleetNotFound):
        store.get("b")
    assert "password" not in (tmp_path / "fleets.toml").read_text()


def test_fleets_live_next_to_profiles(tmp_path: Path) -> None:
    from gpuws.core.profiles import ProfileStore

    assert FleetStore().path.parent == ProfileStore().path.parent
    assert FleetStore().path.name == "fleets.toml"


@pytest.mark.parametrize("url", ["prom:9090", "ftp://prom", "http://user:pw@prom:9090", "http://prom:9090/?x=1",
                                 "http://prom:99999"])
def test_bad_urls_are_refused_in_one_line(url: str) -> None:
    with pytest.raises(ValidationError) as info:
        validate_url(url)
    assert "\n" not in str(info.value) and "pw" not in str(info.value)


def test_selectors() -> None:
    assert parse_selector('cluster="a", Hostname=~"gpu-.*"') == [("cluster", "=", "a"), ("Hostname", "=~", "gpu-.*")]
    assert normalize_selector('{ns!="kube-system"}') == 'ns!="kube-system"'
    assert normalize_selector("  ") is None
    for bad in ['cluster=a', 'cluster="a" x="b"', '"a"', 'up{a="b"}) or vector(1']:
        with pytest.raises(ValidationError):
            parse_selector(bad)


def test_basic_auth_needs_a_user(tmp_path: Path) -> None:
    with pytest.raises(ValidationError):
        FleetStore(tmp_path / "f.toml").add(FleetProfile("a", "http://p:9090", auth=FleetAuth.BASIC))


def test_a_damaged_entry_is_listed_broken_and_the_rest_kept(tmp_path: Path) -> None:
    path = tmp_path / "fleets.toml"
    original = ('schema_version = 1\n[[fleets]]\nname = "ok"\nprometheus = "http://p:9090"\nselectr = "a"\n'
                '[[fleets]]\nname = "bad"\nprometheus = "gopher://x"\n')
    path.write_text(original)
    store = FleetStore(path)
    assert [f.name for f in store.load()] == ["ok"]
    assert [(b.name, b.problem.line, b.problem.key) for b in store.state.broken] == [("bad", 8, "prometheus")]
    (warning,) = store.state.warnings
    assert (warning.line, warning.key) == (5, "selectr") and "did you mean 'selector'" in warning.message
    assert path.read_text() == original  # never moved aside
    store.add(FleetProfile("new", "http://q:9090"))
    text = path.read_text()
    assert 'selectr = "a"' in text and 'prometheus = "gopher://x"' in text  # the user's keys survive the write
    assert [f.name for f in FleetStore(path).load()] == ["new", "ok"]


def test_a_file_that_is_not_toml_is_read_only_and_left_in_place(tmp_path: Path) -> None:
    path = tmp_path / "fleets.toml"
    path.write_text("this is [not toml")
    store = FleetStore(path)
    assert store.load() == []
    assert store.state.read_only is not None and store.state.read_only.line == 1
    with pytest.raises(ReadOnlyFile):
        store.add(FleetProfile("fresh", "http://p:9090"))
    assert path.read_text() == "this is [not toml"


# Found: the fleet store had its own copy of the profile store's file handling, without the
# guards the profile store gained (a symlink to /dev/zero read until memory ran out, a deeply
# nested file raised RecursionError). Both stores now share one record file.


@pytest.mark.timeout(20)
def test_a_fleet_file_symlinked_to_dev_zero_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "fleets.toml"
    path.symlink_to("/dev/zero")
    store = FleetStore(path)
    assert store.load() == []
    assert store.state.read_only is not None and "not a regular file" in store.state.read_only.message
    assert path.is_symlink()


def test_a_deeply_nested_fleet_file_is_read_only_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "fleets.toml"
    content = b"schema_version = 1\nx = " + b"[" * 100_000 + b"]" * 100_000 + b"\n"
    path.write_bytes(content)
    store = FleetStore(path)
    assert store.load() == []
    assert store.state.read_only is not None and "nested more than 64 levels deep" in store.state.read_only.message
    assert path.read_bytes() == content
    notice = store.repair()
    assert notice is not None and notice.backup_path.read_bytes() == content
    store.add(FleetProfile("fresh", "http://p:9090"))
    assert [f.name for f in FleetStore(path).load()] == ["fresh"]


def test_an_oversized_fleet_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "fleets.toml"
    path.write_bytes(b"# " + b"x" * (9 * 1024 * 1024) + b"\nschema_version = 1\n")
    store = FleetStore(path)
    assert store.load() == []
    assert store.state.read_only is not None and "allowed" in store.state.read_only.message
