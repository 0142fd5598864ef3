"""Hostile and careless input on the command line (issue 28): every file a command takes goes
through the one bounded local reader, and refused input exits 2 with one clean line."""

from __future__ import annotations

import json
import os
import re
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


# -- issue 36: exit statuses, one number parser, what the errors say --------------------------------


@pytest.mark.parametrize(("argv", "says"), [
    (["resize", "demo", "7x1g.10gb", "--gpu", "9", "--dry-run"], "no GPU 9"),
    (["resize", "demo", "7x1g.10gb", "--gpu", "2", "--dry-run"], "GPU 2 (NVIDIA L40S) is not MIG-capable"),
    (["resize", "demo", "full", "--gpu", "-1", "--dry-run"], "no GPU -1"),
    (["resize", "demo", "7x1g.10gb", "--gpu", "9", "--yes"], "no GPU 9"),
])
def test_a_gpu_the_user_names_wrongly_is_refused_input_not_a_preflight_refusal(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    """Before: exit 8 ("resize refused by preflight"); a GPU that is not there is a usage error."""
    code, out, err = _run(capsys, *argv)
    assert code == 2, err
    assert says in err and out == ""
    _one_clean_line(err)


def test_a_busy_gpu_is_still_a_preflight_refusal(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The other side of the line: a resize the GPU could take, refused by what runs on it, stays 8.
    The busy fault keeps a process on GPU 0 (the demo's training job alone is absent for a fifth of
    each 2-minute cycle: the resize then went through and exited 0, a flake under load)."""
    monkeypatch.setenv("GPUWS_SIM_FAULTS", "busy:0")
    code, _, err = _run(capsys, "resize", "demo", "7x1g.10gb", "--gpu", "0", "--yes")
    assert code == 8 and re.search(r"in use by \d+ compute process", err), err


# Every numeric option, with digits that int()/float() take and a user never means.
NON_ASCII_NUMBERS = [
    ["desktop", "demo", "--display", "\u0663"],
    ["tunnel", "demo", "--remote", "\u0668\u0668\u0668\u0668"],
    ["tunnel", "demo", "--local", "\u0668\u0668"],
    ["watch", "demo", "--count", "\u0662"],
    ["watch", "demo", "--count", "1", "--interval", "\u0660.\u0665"],
    ["watch", "demo", "--count", "1", "--reconnect-timeout", "1e3"],
    ["resize", "demo", "full", "--gpu", "\u0660", "--dry-run"],
    ["probe", "demo", "--timeout", "\u0663\u0660"],
    ["probe", "demo", "--timeout", "nan"],
    ["health", "demo", "--expect-gpus", "\u0664"],
    ["health", "demo", "--timeout", "inf"],
    ["bench", "demo", "--expect-gpus", "\uff14"],
    ["bench", "demo", "--timeout", "1_0"],
    ["advise", "demo", "--observe", "\u0661"],
    ["mig-parted", "export", "demo", "--gpu", "\u0661"],
    ["fleet", "watch", "x", "--interval", "\u0665"],
    ["fleet", "add", "x", "--prometheus", "http://p:9090", "--price-per-gpu-hour", "\u0661"],
    ["demo-fleet", "--hosts", "\u0662"],
    ["demo-host", "--port", "\u0662\u0662\u0662\u0662"],
    ["hosts", "add", "a", "--host", "10.0.0.1", "--port", "\u0662\u0662"],
]


@pytest.mark.parametrize("argv", NON_ASCII_NUMBERS, ids=lambda argv: " ".join(argv[:2] + argv[-2:-1]))
def test_every_numeric_option_takes_ascii_digits_only(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """Before: `desktop --display ٣` started display :3, `watch --count ٢` streamed two samples."""
    assert _exit_of(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and ("is not a whole number" in err or "is not a number" in err or "port" in err), err
    _one_clean_line(err)


def test_every_numeric_option_goes_through_the_one_parser() -> None:
    """No argparse option of any command converts with int() or float() (they take "٣" and "nan")."""
    from tests.fuzz.test_cli_fuzz import _commands, _parser_of

    raw = [(" ".join(path), option) for path in _commands() for action in _parser_of(path)._actions
           if action.type in (int, float) for option in action.option_strings or [action.dest]]
    assert raw == []


def test_plain_ascii_numbers_are_still_taken(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "watch", "demo", "--count", "1", "--interval", "0.5", "--json")
    assert code == 0, err
    assert len(out.splitlines()) == 4  # one sample per GPU of the demo host
    code, out, err = _run(capsys, "resize", "demo", "full", "--gpu", "0", "--dry-run")
    assert code == 0, err


@pytest.mark.parametrize(("argv", "says"), [
    (["hosts", "add", "a", "--host", "10.0.0.1", "--price-per-hour", "-1"], "price_per_hour: must be 0 or more"),
    (["hosts", "add", "a", "--host", "10.0.0.1", "--budget-daily", "-5"], "budget_daily: must be 0 or more"),
    (["hosts", "add", "a", "--host", "10.0.0.1", "--key", "/dev/zero"],
     "key_path: '/dev/zero' is not a regular file (a private key is a file)"),
    (["hosts", "add", "a", "--host", "10.0.0.1", "--key", "/etc/passwd"],
     "key_path: '/etc/passwd' is not a private key"),
    (["hosts", "add", "a", "--host", "10.0.0.1", "--slice-price", "x=1"], "no slice profile x on this host"),
    (["hosts", "add", "a", "--host", "10.0.0.1", "--slice-price", "1g.10gb=-1"], "must be 0 or more"),
    (["desktop", "demo", "--geometry", "99999x99999"], "the width must be from 100 to 16384 pixels"),
    (["desktop", "demo", "--geometry", "1920x16385"], "the height must be from 100 to 16384 pixels"),
])
def test_errors_say_what_is_wrong_and_refuse_before_anything_runs(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == "" and says in err, err
    _one_clean_line(err)
    assert json.loads(_run(capsys, "hosts", "list", "--json")[1])["hosts"] == []  # nothing was stored


def test_a_public_key_given_as_the_key_is_named_as_such(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True,
                   stdin=subprocess.DEVNULL)
    code, _, err = _run(capsys, "hosts", "add", "a", "--host", "10.0.0.1", "--key", f"{key}.pub")
    assert code == 2 and "is a public key" in err
    code, _, err = _run(capsys, "hosts", "add", "a", "--host", "10.0.0.1", "--key", str(key),
                        "--slice-price", "1g.10gb=0.5", "--slice-price", "type:p4d.24xlarge=32")
    assert code == 0, err


@pytest.mark.parametrize("word", ["nan", "inf", "1e3", "1_0", "0x10", " 1", "\u0661"])
def test_decimal_options_take_no_float_spelling_but_digits(capsys: pytest.CaptureFixture[str], word: str) -> None:
    """float() reads all of these; a user typing seconds means none of them."""
    assert _exit_of(["advise", "demo", "--observe", word]) == 2
    err = capsys.readouterr().err
    assert "--observe:" in err and "is not a number (digits 0-9 and one '.')" in err
    _one_clean_line(err)
