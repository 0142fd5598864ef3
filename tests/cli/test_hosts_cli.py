"""`gpuws hosts ...` run in-process through gpuws.cli.main.main, and once as `python -m gpuws`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.core import paths
from gpuws.core.profiles import ProfileStore

REPO = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def private_key(path: Path) -> Path:
    """A real private key (`--key` is checked to be one since issue 36)."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True,
                   stdin=subprocess.DEVNULL)
    return path


def test_add_list_show_remove(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    key = private_key(tmp_path / "id_ed25519")
    code, out, _ = run(capsys, "hosts", "add", "bastion", "--host", "bastion.example", "--user", "ops")
    assert code == 0
    assert "Added host 'bastion'" in out
    added = run_json(
        capsys, "hosts", "add", "gpu", "--host", "[2001:db8::5]", "--port", "2222", "--key", str(key),
        "--jump", "bastion", "--price-per-hour", "2.5", "--tag", "a100", "--tag", "spot",
        "--provider", "aws", "--instance-id", "i-0abc", "--region", "us-east-1",
    )
    assert added == run_json(capsys, "hosts", "show", "gpu")
    assert isinstance(added, dict)
    assert added["host"] == "2001:db8::5"
    assert (added["port"], added["auth"], added["key_path"], added["jump"]) == (2222, "key", str(key), "bastion")
    assert added["provider"] == {"kind": "aws", "instance_id": "i-0abc", "region": "us-east-1", "commands": {},
                                 "address_from": None}
    assert (added["price_per_hour"], added["tags"], added["user"]) == (2.5, ["a100", "spot"], None)

    listing = run_json(capsys, "hosts", "list")
    assert isinstance(listing, dict)
    assert [h["name"] for h in listing["hosts"]] == ["bastion", "gpu"]
    code, out, _ = run(capsys, "hosts", "list")
    assert "ops@bastion.example:22" in out
    assert "[2001:db8::5]:2222" in out
    code, out, _ = run(capsys, "hosts", "show", "gpu")
    assert re.search(r"^jump host:\s+bastion$", out, re.MULTILINE)

    assert run_json(capsys, "hosts", "remove", "gpu") == {"removed": "gpu", "secrets_cleared": []}
    listing = run_json(capsys, "hosts", "list")
    assert [h["name"] for h in listing["hosts"]] == ["bastion"]  # type: ignore[index]


def test_a_relative_key_path_is_stored_absolute(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "keys").mkdir()
    private_key(tmp_path / "keys" / "id")
    monkeypatch.chdir(tmp_path)
    added = run_json(capsys, "hosts", "add", "k", "--host", "h.example", "--key", "keys/id")
    assert added["key_path"] == str(tmp_path / "keys" / "id")  # type: ignore[index]


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["bad name", "--host", "h.example"], "name"),
        (["-x", "--host", "h.example"], None),  # argparse: an option, not a name
        (["ok", "--host", "-oProxyCommand=x"], None),
        (["ok", "--host=-oProxyCommand=x"], "host"),
        (["ok", "--host", "h;rm -rf /"], "host"),
        (["ok", "--host", "$(id)"], "host"),
        (["ok", "--host", "`id`"], "host"),
        (["ok", "--host", "a\nb"], "host"),
        (["ok", "--host", "h" * 300], "host"),
        (["ok", "--host", "h.example", "--user", "root;id"], "user"),
        (["ok", "--host", "h.example", "--user=-oX"], "user"),
        (["ok", "--host", "h.example", "--port", "0"], "port"),
        (["ok", "--host", "h.example", "--port", "65536"], "port"),
        (["ok", "--host", "h.example", "--port", "ssh"], "port"),
        (["ok", "--host", "h.example", "--key", "/no/such/key"], "key_path"),
        (["ok", "--host", "h.example", "--jump", "nobody"], "jump"),
        (["ok", "--host", "h.example", "--jump", "ok"], "jump"),
        (["ok", "--host", "h.example", "--price-per-hour", "-1"], "price_per_hour"),
        (["ok", "--host", "h.example", "--price-per-hour", "cheap"], "price_per_hour"),
        (["ok", "--host", "h.example", "--provider", "evilcloud"], "provider.kind"),
        (["ok", "--host", "h.example", "--tag", "a b"], "tags"),
    ],
)
def test_hostile_values_are_refused_with_the_field_named(
    capsys: pytest.CaptureFixture[str], argv: list[str], field: str | None
) -> None:
    if field is None:
        with pytest.raises(SystemExit) as exited:  # argparse refuses before we see it
            main(["hosts", "add", *argv])
        assert exited.value.code == 2
        return
    code, out, err = run(capsys, "hosts", "add", *argv)
    assert code != 0
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"gpuws: error: {field}: ")
    assert not ProfileStore().path.exists()


def test_duplicate_and_unknown_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "hosts", "add", "box", "--host", "h.example")[0] == 0
    code, _, err = run(capsys, "hosts", "add", "BOX", "--host", "h.example")
    assert (code, err.strip()) == (2, "gpuws: error: name: a host profile named 'BOX' already exists")
    for action in ("show", "remove"):
        code, _, err = run(capsys, "hosts", action, "ghost")
        assert code == 2
        assert err.startswith("gpuws: error: name: no host profile named 'ghost'")


def test_a_corrupt_profile_file_is_reported_on_stderr_and_left_alone(capsys: pytest.CaptureFixture[str]) -> None:
    path = paths.config_dir() / "profiles.toml"
    path.write_text("this is [ not toml")
    code, out, err = run(capsys, "hosts", "list", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["hosts"] == [] and doc["read_only"]["line"] == 1 and doc["read_only"]["column"] == 6
    assert err.startswith(f"gpuws: warning: {path}:1:6: is not valid TOML")
    assert path.read_text() == "this is [ not toml"
    assert list(paths.config_dir().glob("profiles.toml.corrupt-*")) == []


def write_ssh_config(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(home))
    config = home / ".ssh" / "config"
    config.write_text(
        "Host bastion\n  HostName b.example\n"
        "Host gpu\n  HostName 10.0.0.9\n  ProxyJump bastion\n"
        "Host evil\n  HostName $(id)\n"
        "Host *\n  User me\n"
    )
    return config


def test_import_ssh_config_dry_run_then_import_then_again(
    capsys: pytest.CaptureFixture[str], isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_ssh_config(isolated_home, monkeypatch)
    dry = run_json(capsys, "hosts", "import-ssh-config", "--dry-run")
    assert isinstance(dry, dict)
    assert (dry["dry_run"], dry["added"], dry["existing"]) == (True, ["bastion", "gpu"], [])
    assert {s["host"] for s in dry["skipped"]} == {"evil", "*"}
    assert not ProfileStore().path.exists()

    code, out, _ = run(capsys, "hosts", "import-ssh-config")
    assert code == 0
    assert "Added 2 host(s): bastion, gpu" in out
    assert "Skipped evil: host:" in out
    assert ProfileStore().get("gpu").jump == "bastion"
    assert ProfileStore().get("gpu").user == "me"

    again = run_json(capsys, "hosts", "import-ssh-config")
    assert isinstance(again, dict)
    assert (again["added"], again["existing"]) == ([], ["bastion", "gpu"])


def test_import_of_a_missing_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "hosts", "import-ssh-config", str(tmp_path / "nope"))
    assert code == 2
    assert err.startswith("gpuws: error: path: ") and err.count("\n") == 1


def test_python_dash_m_gpuws_round_trip(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    add = subprocess.run(
        [sys.executable, "-m", "gpuws", "hosts", "add", "sub", "--host", "203.0.113.9", "--json"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert add.returncode == 0, add.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "gpuws", "hosts", "list", "--json"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert [h["name"] for h in json.loads(listed.stdout)["hosts"]] == ["sub"]
    refused = subprocess.run(
        [sys.executable, "-m", "gpuws", "hosts", "add", "x", "--host", "a b"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith("gpuws: error: host: ")
    assert "Traceback" not in refused.stderr


def test_address_from_is_stored_edited_and_cleared(capsys: pytest.CaptureFixture[str]) -> None:
    """`--address-from`: which address a start or resize reads back from the provider (public by
    default), kept in the profile file."""
    added = run_json(capsys, "hosts", "add", "g6f", "--host", "203.0.113.9", "--provider", "aws",
                     "--instance-id", "i-0abc", "--region", "us-east-2", "--address-from", "private")
    assert isinstance(added, dict) and added["provider"]["address_from"] == "private"
    code, _, _ = run(capsys, "hosts", "edit", "g6f", "--address-from", "dns")
    assert code == 0
    shown = run_json(capsys, "hosts", "show", "g6f")
    assert isinstance(shown, dict) and shown["provider"]["address_from"] == "dns"
    assert shown["provider"]["instance_id"] == "i-0abc"  # the rest of the provider table kept
    code, _, _ = run(capsys, "hosts", "edit", "g6f", "--address-from", "")
    assert code == 0
    cleared = run_json(capsys, "hosts", "show", "g6f")
    assert isinstance(cleared, dict) and cleared["provider"]["address_from"] is None  # public, the default
    with pytest.raises(SystemExit) as refused:
        run(capsys, "hosts", "edit", "g6f", "--address-from", "elastic")
    assert refused.value.code == 2 and "invalid choice: 'elastic'" in capsys.readouterr().err
