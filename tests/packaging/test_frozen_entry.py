"""The frozen app's entry script: the gpuws CLI, and python3 for the simulated host.

In the frozen app `sys.executable` is the gpuws binary, so the demo host's `python3` and
`nvidia-smi` wrappers call it with interpreter arguments. Here the same script runs under the
venv's python (quick); tests/packaging/test_deb_install.py runs it frozen and installed.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
ENTRY = REPO / "packaging" / "gpuws_entry.py"
FAKE_NVML = REPO / "gpuws" / "sim" / "fake_nvml"


def _load_entry() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpuws_frozen_entry", ENTRY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(
    args: list[str],
    stdin: str = "",
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    # PYTHONPATH is what the entry honours itself; -E keeps the real interpreter from doing it too.
    return subprocess.run(
        [sys.executable, "-E", str(ENTRY), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd or REPO,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["-m", "gpuws.sim.nvidia_smi", "-L"], ("module", "gpuws.sim.nvidia_smi", ["-L"])),
        (["-u", "-c", "print(1)", "x"], ("code", "print(1)", ["x"])),
        (["-", "--hz", "10"], ("stdin", "-", ["--hz", "10"])),
        (["--version"], None),
        (["--demo", "--screenshot", "out.png"], None),
        (["hosts", "list"], None),
        (["-m"], None),  # incomplete: left to the CLI, which reports it
        ([], None),
        (["missing_script.py"], None),  # not a file: not an interpreter call
    ],
)
def test_interpreter_calls_are_told_from_cli_calls(
    args: list[str], expected: tuple[str, str, list[str]] | None
) -> None:
    assert _load_entry().interpreter_call(args) == expected


def test_script_file_is_an_interpreter_call(tmp_path: Path) -> None:
    script = tmp_path / "runner.py"
    script.write_text("")
    assert _load_entry().interpreter_call([str(script), "--json"]) == ("file", str(script), ["--json"])


def test_the_benchmark_zipapp_runs_as_python3_runs_it(tmp_path: Path) -> None:
    """Issue 32: the benchmark runner goes to hosts as one zip; the frozen app, as the simulated
    host's python3, runs it too."""
    from gpuws.remote.bench import runner_zip

    archive = tmp_path / "gpuws_bench.pyz"
    archive.write_bytes(runner_zip())
    assert _load_entry().interpreter_call([str(archive), "--json"]) == ("file", str(archive), ["--json"])
    proc = _run([str(archive), "--json", "--backend", "cpu", "--timeout", "20"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert '"type": "summary"' in proc.stdout.splitlines()[-1]


def test_stdin_script_sees_its_args_and_the_fake_nvml_on_pythonpath() -> None:
    source = "import sys, pynvml\nprint(sys.argv, pynvml.GPUWS_SIMULATED, __name__)\n"
    proc = _run(["-", "--hz", "10"], stdin=source, env={"PYTHONPATH": str(FAKE_NVML)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['-', '--hz', '10'] True __main__"


def test_code_and_exit_status_pass_through() -> None:
    proc = _run(["-c", "import sys; print(sys.argv[1:]); sys.exit(3)", "a", "b"])
    assert (proc.returncode, proc.stdout.strip()) == (3, "['a', 'b']")


def test_uncaught_error_is_a_traceback_and_status_1() -> None:
    proc = _run(["-c", "raise ValueError('boom')"])
    assert proc.returncode == 1
    assert "ValueError: boom" in proc.stderr and "Traceback" in proc.stderr


def test_script_file_runs_as_main_with_its_dir_on_the_path(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("VALUE = 42\n")
    script = tmp_path / "runner.py"
    script.write_text("import sys, helper\nif __name__ == '__main__':\n    print(helper.VALUE, sys.argv[1:])\n")
    proc = _run([str(script), "--json"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "42 ['--json']"
    assert not (tmp_path / "__pycache__").exists()  # nothing written next to the scripts it runs


def test_module_runs_the_simulated_nvidia_smi(tmp_path: Path) -> None:
    proc = _run(["-m", "gpuws.sim.nvidia_smi", "-L"], env={"GPUWS_SIM_STATE": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("GPU 0: NVIDIA H100")


def test_anything_else_is_the_gpuws_cli() -> None:
    from gpuws import __version__

    proc = _run(["--version"])
    assert (proc.returncode, proc.stdout.strip()) == (0, f"gpuws {__version__}")
