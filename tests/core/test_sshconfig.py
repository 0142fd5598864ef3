"""~/.ssh/config import: aliases become profiles; wildcards, hostile values and loops are reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuws.core.errors import ValidationError
from gpuws.core.models import AuthMethod
from gpuws.core.sshconfig import import_ssh_config


@pytest.fixture
def ssh_dir(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's ~/.ssh (HOME points at the isolated home, so '~' expands there)."""
    monkeypatch.setenv("HOME", str(isolated_home))
    return isolated_home / ".ssh"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def by_name(result: object) -> dict[str, object]:
    return {p.name: p for p in result.profiles}  # type: ignore[attr-defined]


def test_hosts_with_defaults_keys_and_jump_hosts(ssh_dir: Path) -> None:
    write(ssh_dir / "id_gpu", "key")
    write(ssh_dir / "config", """
# a comment
Host gpu1 gpu2
    HostName 10.0.0.5
    Port 2222
    IdentityFile ~/.ssh/id_gpu
    IdentityFile ~/.ssh/id_other
    ProxyJump bastion
Host bastion
    HostName bastion.example.com
    User ops
Host v6box
    HostName=2001:db8::9
Host *
    User default-user
""")
    result = import_ssh_config()
    profiles = by_name(result)
    assert set(profiles) == {"gpu1", "gpu2", "bastion", "v6box"}
    gpu1 = profiles["gpu1"]
    assert (gpu1.host, gpu1.port, gpu1.user, gpu1.jump) == ("10.0.0.5", 2222, "default-user", "bastion")
    assert (gpu1.auth, gpu1.key_path) == (AuthMethod.KEY, "~/.ssh/id_gpu")  # the first IdentityFile
    assert gpu1.identity_files == ["~/.ssh/id_other"]  # and the next one, in order (issue 28)
    assert profiles["bastion"].user == "ops"  # the first value wins over Host *
    assert profiles["bastion"].auth == AuthMethod.AGENT
    assert profiles["v6box"].host == "2001:db8::9"
    # Jump hosts come before the profiles that use them, so they can be added in order.
    order = [p.name for p in result.profiles]
    assert order.index("bastion") < order.index("gpu1")
    assert ("*", "wildcard pattern, not a host (its settings apply to the hosts it matches)") in result.skipped


def test_wildcard_only_entries_are_skipped_and_reported(ssh_dir: Path) -> None:
    write(ssh_dir / "config", "Host *.example !blocked real\n  HostName real.example\nHost gpu-??\n  Port 2\n")
    result = import_ssh_config()
    assert [p.name for p in result.profiles] == ["real"]
    skipped = dict(result.skipped)
    assert set(skipped) == {"*.example", "!blocked", "gpu-??"}
    assert "negated" in skipped["!blocked"]


def test_includes_relative_globbed_nested_and_looping(ssh_dir: Path) -> None:
    write(ssh_dir / "config", "Include conf.d/*.conf\nHost main\n  HostName main.example\n")
    write(ssh_dir / "conf.d" / "b.conf", "Host from-b\n  HostName b.example\nInclude ~/.ssh/nested/inner\n")
    write(ssh_dir / "conf.d" / "a.conf", "Host from-a\n  HostName a.example\n")
    write(ssh_dir / "conf.d" / "ignored.txt", "Host not-included\n")
    write(ssh_dir / "nested" / "inner", "Host inner\n  HostName inner.example\nInclude conf.d/b.conf\n")
    result = import_ssh_config()
    # "inner" sits in an Include inside from-b's block: OpenSSH never applies it to "inner".
    assert [p.name for p in result.profiles] == ["from-a", "from-b", "main"]
    assert "never applies" in dict(result.skipped)["inner"]
    assert any("loop" in reason for _, reason in result.skipped)


def test_the_block_open_before_an_include_is_open_again_after_it(ssh_dir: Path) -> None:
    write(ssh_dir / "extra", "Host other\n  HostName other.example\n")
    write(ssh_dir / "config", "Host gpu\n  Include extra\n  HostName gpu.example\n  User me\n")
    result = import_ssh_config()
    profiles = by_name(result)
    assert profiles["gpu"].host == "gpu.example"
    assert profiles["gpu"].user == "me"
    # The Include is inside `Host gpu`: OpenSSH applies it only to gpu, so "other" is not a host.
    assert "other" not in profiles and "never applies" in dict(result.skipped)["other"]


def test_match_blocks_are_never_executed(ssh_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    write(ssh_dir / "config", f"""
Match exec "touch {marker}"
    User attacker
Host gpu
    HostName gpu.example
Match all
    Port 9999
""")
    result = import_ssh_config()
    assert not marker.exists()
    gpu = by_name(result)["gpu"]
    assert (gpu.user, gpu.port) == (None, 9999)  # Match exec never runs (not applied); Match all applies
    assert [(h, "never run" in note) for h, note in result.notes] == [("gpu", True)]


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("HostName -oProxyCommand=x", "host"),
        ("HostName a b", "host"),
        ("HostName h;rm -rf /", "host"),
        ("HostName $(id)", "host"),
        ("HostName `id`", "host"),
        ("User -oProxyCommand=x", "user"),
        ("User $(id)", "user"),
        ("Port 0", "port"),
        ("Port 22;id", "port"),
        ("HostName " + "a" * 300, "host"),
    ],
)
def test_hostile_values_are_skipped_with_the_field_named(ssh_dir: Path, line: str, field: str) -> None:
    write(ssh_dir / "config", f"Host evil\n    {line}\nHost fine\n    HostName fine.example\n")
    result = import_ssh_config()
    assert [p.name for p in result.profiles] == ["fine"]
    ((_host, reason),) = [s for s in result.skipped if s[0] == "evil"]
    assert reason.startswith(f"{field}:")


def test_hostile_aliases_and_unparsable_lines_never_crash(ssh_dir: Path) -> None:
    write(ssh_dir / "config", 'Host -oProxyCommand=x "a b" ok\n  HostName ok.example\nHost "unbalanced\n'
                              "justonetoken\nHost ok2\n  HostName ok2.example\n")
    result = import_ssh_config()
    assert [p.name for p in result.profiles] == ["ok", "ok2"]
    reasons = dict(result.skipped)
    assert reasons["-oProxyCommand=x"].startswith("name:")
    assert reasons["a b"].startswith("name:")
    assert any("cannot be parsed" in reason for reason in reasons.values())


def test_unmappable_proxy_jumps_and_proxy_commands_are_reported(ssh_dir: Path) -> None:
    write(ssh_dir / "config", """
Host direct
    HostName d.example
Host via-unknown
    HostName u.example
    ProxyJump ops@elsewhere.example:2222
Host via-command
    HostName c.example
    ProxyCommand nc %h %p
Host via-skipped
    HostName s.example
    ProxyJump via-unknown
Host loop-a
    HostName a.example
    ProxyJump loop-b
Host loop-b
    HostName b.example
    ProxyJump loop-a
""")
    result = import_ssh_config()
    assert [p.name for p in result.profiles] == ["direct", "via-unknown", "via-skipped"]
    # A user@host:port jump host needs no profile of its own; an imported alias is referred to.
    assert by_name(result)["via-unknown"].jump == "ssh://ops@elsewhere.example:2222"
    assert by_name(result)["via-skipped"].jump == "via-unknown"
    reasons = dict(result.skipped)
    assert "ProxyCommand" in reasons["via-command"]
    assert "cycle" in reasons["loop-a"]
    assert "loop-b" in reasons


def test_a_missing_config_file_is_a_clear_error(ssh_dir: Path) -> None:
    with pytest.raises(ValidationError, match="no such file") as err:
        import_ssh_config(ssh_dir / "nope")
    assert err.value.field == "path"


def test_missing_identity_files_fall_through_to_the_next_as_ssh_does(ssh_dir: Path) -> None:
    write(ssh_dir / "second", "key")
    write(ssh_dir / "config", "Host gpu\n  IdentityFile ~/.ssh/first\n  IdentityFile ${HOME}/.ssh/second\n"
                              "Host none\n  IdentityFile /nonexistent/key\n")
    result = import_ssh_config()
    profiles = by_name(result)
    assert (profiles["gpu"].auth, profiles["gpu"].key_path) == (AuthMethod.KEY, str(ssh_dir / "second"))
    assert (profiles["none"].auth, profiles["none"].key_path) == (AuthMethod.AGENT, None)
    assert any(h == "none" and "not found" in note for h, note in result.notes)


def test_what_gpuws_does_not_follow_is_said_per_host_and_never_run(ssh_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    write(ssh_dir / "config", f"""
Host local
    HostName l.example
    PermitLocalCommand yes
    LocalCommand touch {marker}
Host proxied
    ProxyCommand touch {marker}
Match originalhost local exec "touch {marker}"
    Port 2200
Match host l.example
    User matched
""")
    result = import_ssh_config()
    assert not marker.exists()
    local = by_name(result)["local"]
    assert (local.user, local.port) == ("matched", 22)  # Match host evaluated; Match exec never run
    notes = [note for host, note in result.notes if host == "local"]
    assert any("LocalCommand" in n for n in notes) and any("Match exec" in n for n in notes)
    assert "ProxyCommand" in dict(result.skipped)["proxied"]


def test_every_identity_file_is_kept_in_order_and_a_relative_one_is_under_the_working_directory(
    ssh_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28: a second IdentityFile was dropped. Issue 36: `IdentityFile id_relative` is opened by
    OpenSSH against the directory ssh runs in (tests/core/test_sshconfig_hostile.py checks `ssh`
    itself), so the import makes it absolute there, never under ~/.ssh."""
    write(ssh_dir / "id_first", "key")
    elsewhere = tmp_path / "cwd"
    write(elsewhere / "id_relative", "the relative one")
    monkeypatch.chdir(elsewhere)
    write(ssh_dir / "config", "Host gpu\n  IdentityFile ~/.ssh/id_first\n  IdentityFile id_relative\n"
                              "  IdentityFile ~/.ssh/id_third\n")
    result = import_ssh_config()
    gpu = by_name(result)["gpu"]
    assert gpu.key_path == "~/.ssh/id_first"
    assert gpu.identity_files == [str(elsewhere / "id_relative"), "~/.ssh/id_third"]
    assert [note for host, note in result.notes if host == "gpu"] == [
        "IdentityFile not found: ~/.ssh/id_third; kept in the profile"]
