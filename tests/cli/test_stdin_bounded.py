"""Every stdin gpuws takes goes through one bounded reader (issue 36): a secret is at most 64 KiB
of UTF-8 text without NUL; anything else is exit status 2 with the reason, nothing is stored, and
reading stops at the bound (`< /dev/zero` ends at once, in bounded memory).

The real CLI runs in a child process whose peak memory (VmHWM in /proc, read by the child itself
as it exits) is checked as an upper bound; an address-space limit keeps a regression from eating
the machine (it then fails with MemoryError instead of exit 2).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.backends.fail
import keyring.errors
import pytest

from gpuws.cli.main import main
from gpuws.core.errors import RefusedInput
from gpuws.core.fleet.profiles import SECRET_SERVICE
from gpuws.core.models import SecretKind
from gpuws.core.stdin import MAX_SECRET_BYTES, check_secret, read_piped

REPO = Path(__file__).resolve().parents[2]
PEAK_RSS_BOUND_KIB = 300 * 1024  # the CLI with keyring and D-Bus loaded is ~60 MiB; 15 GB before the fix
ADDRESS_SPACE_LIMIT = 3 << 30
# Runs gpuws in this process and writes its peak resident memory (KiB) where GPUWS_TEST_PEAK says.
_LAUNCH = """
import os, runpy, sys
sys.argv = ["gpuws", *sys.argv[1:]]
try:
    runpy.run_module("gpuws", run_name="__main__")
finally:
    status = open("/proc/self/status").read()
    peak = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    open(os.environ["GPUWS_TEST_PEAK"], "w").write(peak)
"""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def _gpuws(tmp_path: Path, stdin: Path, *argv: str) -> tuple[subprocess.CompletedProcess[str], int]:
    peak_file = tmp_path / f"peak-{uuid.uuid4().hex}"
    env = {**os.environ, "PYTHONPATH": str(REPO), "GPUWS_TEST_PEAK": str(peak_file)}
    with stdin.open("rb") as source:
        done = subprocess.run([sys.executable, "-c", _LAUNCH, *argv], stdin=source, env=env, capture_output=True,
                              text=True, timeout=120, preexec_fn=_limit_memory)
    peak = int(peak_file.read_text()) if peak_file.exists() else -1
    return done, peak


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, Path]:
    big = tmp_path / "ten-megabytes"
    big.write_bytes(b"a" * (10 * 1024 * 1024))
    nul = tmp_path / "nul"
    nul.write_bytes(b"pass\x00word\n")
    latin1 = tmp_path / "latin1"
    latin1.write_bytes("pässword".encode("latin-1"))
    return {"/dev/zero": Path("/dev/zero"), "10 MB": big, "NUL": nul, "Latin-1": latin1}


REASONS = {"/dev/zero": "more than 64 KiB", "10 MB": "more than 64 KiB", "NUL": "NUL", "Latin-1": "not UTF-8"}


@pytest.fixture
def profile(capsys: pytest.CaptureFixture[str]) -> Iterator[str]:
    name = f"stdin-{uuid.uuid4().hex[:12]}"
    assert main(["hosts", "add", name, "--host", "h.example", "--auth", "password"]) == 0
    capsys.readouterr()
    yield name
    with contextlib.suppress(keyring.errors.KeyringError):
        keyring.delete_password("gpuws", f"{name}:password")


@pytest.mark.keyring
@pytest.mark.parametrize("source", list(REASONS))
def test_secret_set_refuses_what_is_not_a_secret_and_stops_reading(
    source: str, profile: str, inputs: dict[str, Path], tmp_path: Path
) -> None:
    done, peak = _gpuws(tmp_path, inputs[source], "secret", "set", profile, "--kind", "password")
    assert done.returncode == 2, done.stderr[-2000:]
    assert REASONS[source] in done.stderr and "nothing was stored" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert 0 < peak < PEAK_RSS_BOUND_KIB, peak
    assert keyring.get_password("gpuws", f"{profile}:password") is None


@pytest.mark.keyring
@pytest.mark.parametrize(("source", "flags"), [
    ("/dev/zero", ["--token-stdin"]),
    ("10 MB", ["--token-stdin"]),
    ("NUL", ["--user", "me", "--password-stdin"]),
    ("/dev/zero", ["--user", "me", "--password-stdin"]),
])
def test_fleet_add_refuses_what_is_not_a_secret_and_stores_nothing(
    source: str, flags: list[str], inputs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"f{uuid.uuid4().hex[:10]}"
    try:
        done, peak = _gpuws(tmp_path, inputs[source], "fleet", "add", name, "--prometheus", "http://p:9090", *flags)
        assert done.returncode == 2, done.stderr[-2000:]
        assert REASONS[source] in done.stderr and "Traceback" not in done.stderr
        assert 0 < peak < PEAK_RSS_BOUND_KIB, peak
        assert main(["fleet", "list", "--json"]) == 0
        assert name not in capsys.readouterr().out
        for kind in ("token", "password"):
            assert keyring.get_password(SECRET_SERVICE, f"{name}:{kind}") is None
    finally:
        for kind in ("token", "password"):
            with contextlib.suppress(keyring.errors.KeyringError):
                keyring.delete_password(SECRET_SERVICE, f"{name}:{kind}")


def test_the_reader_stops_one_line_break_past_the_bound() -> None:
    class Counting(io.BytesIO):
        asked = 0

        def read(self, size: int | None = -1) -> bytes:
            Counting.asked += size if size is not None and size >= 0 else 1 << 60
            return super().read(size)

    class Stdin(io.StringIO):
        buffer = Counting(b"x" * (50 * 1024 * 1024))

    with pytest.raises(RefusedInput, match="more than 64 KiB"):
        read_piped(Stdin(), "secret")
    assert Counting.asked == MAX_SECRET_BYTES + 2


def test_a_secret_of_exactly_64_kib_with_its_line_break_is_taken() -> None:
    class Stdin(io.StringIO):
        buffer = io.BytesIO(b"s" * MAX_SECRET_BYTES + b"\n")

    assert read_piped(Stdin(), "secret") == "s" * MAX_SECRET_BYTES

    class Over(io.StringIO):
        buffer = io.BytesIO(b"s" * (MAX_SECRET_BYTES + 1))

    with pytest.raises(RefusedInput):
        read_piped(Over(), "secret")


@pytest.mark.parametrize(("value", "reason"), [
    ("", "empty"), ("a\x00b", "NUL"), ("x" * (MAX_SECRET_BYTES + 1), "64 KiB"), ("\udcff", "not UTF-8"),
])
def test_the_keyring_store_takes_only_secrets_the_reader_would(value: str, reason: str) -> None:
    """The window stores secrets through SecretStore.set too: the same rule, before the keyring."""
    from gpuws.core.secrets import SecretStore

    with pytest.raises(RefusedInput, match=reason):
        check_secret(value, "secret")
    with pytest.raises(RefusedInput, match=reason):
        SecretStore(backend=keyring.backends.fail.Keyring()).set("h", SecretKind.PASSWORD, value)  # type: ignore[no-untyped-call]


def test_a_typed_confirmation_is_read_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuws.core.stdin import MAX_ANSWER_CHARS, read_answer

    line = io.StringIO("y" * 10_000 + "\n")
    assert read_answer(line) == "y" * (MAX_ANSWER_CHARS + 1)
    assert json.dumps(read_answer(io.StringIO("demo\r\n"))) == '"demo"'
