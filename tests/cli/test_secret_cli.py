"""`gpuws secret ...`: secrets reach the real keyring and nowhere else (files, output, logs)."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.backends.fail
import pytest

from gpuws.cli.main import main
from gpuws.core import paths

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def profile(capsys: pytest.CaptureFixture[str]) -> Iterator[str]:
    """A host profile with a name unique to this test; its keyring entries are removed afterwards."""
    name = f"cli-{uuid.uuid4().hex[:12]}"
    assert main(["hosts", "add", name, "--host", "h.example", "--auth", "password"]) == 0
    capsys.readouterr()
    yield name
    for kind in ("password", "passphrase", "token"):
        with contextlib.suppress(keyring.errors.KeyringError):
            keyring.delete_password("gpuws", f"{name}:{kind}")


def feed_stdin(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))


def files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


@pytest.mark.keyring
def test_a_stored_secret_is_in_the_keyring_and_nowhere_else(
    profile: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = f"Sup3r-{uuid.uuid4().hex}-s3cret"
    caplog.set_level(logging.DEBUG)
    feed_stdin(monkeypatch, secret + "\n")
    assert main(["secret", "set", profile, "--kind", "password"]) == 0
    assert keyring.get_password("gpuws", f"{profile}:password") == secret  # the newline is not part of it

    outputs = [capsys.readouterr()]
    # Everything else a user might run afterwards must not show it either.
    for argv in (["hosts", "list"], ["hosts", "show", profile], ["hosts", "show", profile, "--json"],
                 ["hosts", "list", "--json"]):
        assert main(argv) == 0
        outputs.append(capsys.readouterr())
    feed_stdin(monkeypatch, secret)
    assert main(["secret", "set", profile, "--kind", "token", "--json"]) == 0
    stored = capsys.readouterr()
    assert json.loads(stored.out) == {"name": profile, "kind": "token", "stored": True}
    outputs.append(stored)

    for captured in outputs:
        assert secret not in captured.out
        assert secret not in captured.err
    assert caplog.records, "the secrets module logs what it does (without the value)"
    for record in caplog.records:
        assert secret not in record.getMessage()
    assert caplog.text and secret not in caplog.text
    assert files_containing(paths.config_dir(), secret.encode()) == []
    assert files_containing(paths.data_dir(), secret.encode()) == []

    assert main(["secret", "clear", profile, "--kind", "password", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"name": profile, "kind": "password", "cleared": True}
    assert keyring.get_password("gpuws", f"{profile}:password") is None
    assert main(["secret", "clear", profile, "--kind", "password"]) == 0
    assert "No password was stored" in capsys.readouterr().out


@pytest.mark.keyring
def test_removing_a_host_clears_its_secrets(
    profile: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    feed_stdin(monkeypatch, "pass-phrase")
    assert main(["secret", "set", profile, "--kind", "passphrase"]) == 0
    capsys.readouterr()
    assert main(["hosts", "remove", profile, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"removed": profile, "secrets_cleared": ["passphrase"]}
    assert keyring.get_password("gpuws", f"{profile}:passphrase") is None


@pytest.mark.keyring
def test_secret_set_from_a_pipe_in_a_subprocess(profile: str) -> None:
    secret = f"piped-{uuid.uuid4().hex}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "gpuws", "secret", "set", profile, "--kind", "password"],
        input=secret + "\n", env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout + done.stderr
    assert keyring.get_password("gpuws", f"{profile}:password") == secret


def test_a_secret_on_the_command_line_is_refused_without_echoing_it(
    profile: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["secret", "set", profile, "hunter2-on-argv", "--kind", "password"])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("gpuws: error: secret: refusing a secret given on the command line")
    assert "hunter2-on-argv" not in out + err


def test_an_unknown_profile_is_refused(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    feed_stdin(monkeypatch, "x")
    assert main(["secret", "set", "ghost", "--kind", "password"]) == 2
    assert capsys.readouterr().err.startswith("gpuws: error: name: no host profile named 'ghost'")


def test_no_usable_keyring_is_said_plainly_and_nothing_is_written(
    profile: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    previous = keyring.get_keyring()
    keyring.set_keyring(keyring.backends.fail.Keyring())
    try:
        feed_stdin(monkeypatch, "would-be-secret")
        code = main(["secret", "set", profile, "--kind", "password"])
    finally:
        keyring.set_keyring(previous)
    out, err = capsys.readouterr()
    assert code == 1
    assert err.startswith("gpuws: error: keyring: no keyring backend is available")
    assert "gnome-keyring" in err
    assert "would-be-secret" not in out + err
    assert files_containing(paths.config_dir(), b"would-be-secret") == []
    assert sys.stdin.read() == "would-be-secret"  # refused before the secret was even read


def test_an_empty_secret_is_refused(
    profile: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    feed_stdin(monkeypatch, "\n")
    monkeypatch.setattr("gpuws.core.secrets.SecretStore.ensure_usable", lambda self: None)
    assert main(["secret", "set", profile, "--kind", "token"]) == 2
    assert "empty" in capsys.readouterr().err
