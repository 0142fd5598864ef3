"""Hostile and careless input on the command line (issue 28): every file a command takes goes
through the one bounded local reader, and refused input exits 2 with one clean line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpuws.cli.main import main
from gpuws.core.models import AuthMethod
from tests.cli.test_probe_cli import gpu_host, gpuws, save_profile  # noqa: F401 (a fixture)
from tests.support.sshd import SshdServer

CONFIG = str(Path(__file__).resolve().parents[1] / "fixtures" / "mig-parted" / "config-default.yaml")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_clean_line(err: str) -> None:
    assert "Traceback" not in err and err.count("\n") == 1 and "\x1b" not in err


@pytest.mark.parametrize("verb", ["assert", "apply"])
def test_a_device_as_the_mig_parted_file_is_refused_at_once(capsys: pytest.CaptureFixture[str], verb: str) -> None:
    code, out, err = _run(capsys, "mig-parted", verb, "demo", "/dev/zero", "--config", "x")
    assert code == 2 and out == "" and "is not a regular file" in err
    _one_clean_line(err)


def test_a_fifo_as_the_mig_parted_file_never_hangs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(main(["mig-parted", "assert", "demo", str(fifo),
                                                                 "--config", "x"])), daemon=True)
    worker.start()
    worker.join(60)  # a guard against a hang, not a timing assertion
    if worker.is_alive():
        with open(fifo, "w"):  # let the blocked reader go before failing
            pass
        pytest.fail("reading a FIFO blocked")
    assert result == [2]
    _one_clean_line(capsys.readouterr().err)


def test_unknown_config_and_foreign_file_are_refused_input(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = _run(capsys, "mig-parted", "assert", "demo", CONFIG, "--config", "no-such-config")
    assert code == 2 and "has no config named 'no-such-config'" in err
    _one_clean_line(err)
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n")
    code, _, err = _run(capsys, "mig-parted", "apply", "demo", str(passwd), "--config", "x", "--yes")
    assert code == 2 and "passwd" in err
    _one_clean_line(err)
    code, _, err = _run(capsys, "mig-parted", "apply", "demo", str(tmp_path / "missing.yaml"), "--config", "x")
    assert code == 2 and "does not exist" in err


@pytest.mark.parametrize(("argv", "field"), [
    (["hosts", "add", "a", "--host", "10.0.0.1", "--price-per-hour", "\u0661.\u0665"], "price_per_hour:"),
    (["hosts", "add", "a", "--host", "10.0.0.1", "--price-per-hour", "1e3"], "price_per_hour:"),
    (["hosts", "add", "a", "--host", "10.0.0.1", "--jump", "u@-oProxyCommand=x"], "jump:"),
    (["hosts", "add", "demo", "--host", "10.0.0.1"], "name: 'demo' is the built-in simulated host"),
])
def test_hosts_add_refuses_each_field_by_its_name(capsys: pytest.CaptureFixture[str], argv: list[str],
                                                  field: str) -> None:
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == "" and err.startswith(f"gpuws: error: {field}")
    _one_clean_line(err)
    assert json.loads(_run(capsys, "hosts", "list", "--json")[1])["hosts"] == []  # nothing was stored


def test_a_plain_ascii_price_is_still_taken(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "hosts", "add", "a", "--host", "10.0.0.1", "--price-per-hour", "1.50")
    assert code == 0, err


def _exit_of(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as stop:  # argparse's usage errors and --help
        return int(stop.code or 0)


@pytest.mark.parametrize("argv", [
    ["watch", "demo", "--interval", "\x1b[31mred"],
    ["probe", "demo", "--bogus", "\x1b]0;title\x07"],
    ["\u202eevil"],
    ["hosts", "add", "x", "--port", "\x9b2J"],
    ["mig-parted", "assert"],
])
def test_usage_errors_are_one_line_and_never_echo_raw_control_characters(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert _exit_of(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("gpuws: error: ")
    _one_clean_line(err)
    assert not any(ch in err for ch in "\x07\x9b\u202e")


def test_a_command_group_without_its_subcommand_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_of(["hosts"]) == 2
    _one_clean_line(capsys.readouterr().err)


def test_cp_to_a_name_too_long_is_one_line_not_a_traceback(capsys: pytest.CaptureFixture[str],
                                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["cp", "demo:/etc/hostname", "x" * 300])
    err = capsys.readouterr().err
    assert code in (1, 2) and "too long" in err
    _one_clean_line(err)


@pytest.mark.sshd
def test_probe_of_a_password_profile_without_a_keyring_is_an_auth_failure(
    gpu_host: SshdServer, isolated_home: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    """Issue 28: exit 1 before; a login that cannot get its password is exit status 3."""
    save_profile(gpu_host, name="pw", auth=AuthMethod.PASSWORD, key_path=None)
    (isolated_home / ".ssh" / "known_hosts").write_text(gpu_host.known_hosts_line())
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    result = gpuws("probe", "pw", home=isolated_home)
    assert result.returncode == 3, result.stderr
    assert "keyring" in result.stderr
    _one_clean_line(result.stderr)


def test_a_killed_benchmark_stays_in_the_history_as_interrupted(tmp_path: Path) -> None:
    """Issue 28: `kill -9` during `gpuws bench` left no record. Now the run is recorded as
    interrupted when it starts, and replaced once it finishes."""
    from gpuws.core.bench.results import ResultStore

    store = ResultStore()
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    with subprocess.Popen([sys.executable, "-m", "gpuws", "bench", "demo", "--full"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as child:
        assert child.stdout is not None
        # The banner is printed after the record is written: kill at once after it.
        for line in child.stdout:
            if "running the full benchmark" in line:
                break
        child.send_signal(signal.SIGKILL)
        child.wait()
    (run,) = store.history("demo")
    assert run.interrupted and run.mode == "full" and run.results == []
    assert run.to_dict()["interrupted"] is True and "interrupted" in (run.error or "")
    assert run.verdict().value == "inconclusive"


def test_a_finished_benchmark_replaces_its_interrupted_record(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuws.core.bench.results import ResultStore

    assert main(["bench", "demo", "--quick", "--json"]) in (0, 11, 12)
    capsys.readouterr()
    (run,) = ResultStore().history("demo")
    assert not run.interrupted and run.results
