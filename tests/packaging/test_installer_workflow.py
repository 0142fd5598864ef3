"""The workflow that builds the Windows and macOS installers on native runners (issue 27) runs
the repository's own installer scripts, which exist, and smoke-tests what it installed."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "installers.yml"


def _script(job: dict[str, object]) -> str:
    steps = job["steps"]
    assert isinstance(steps, list)
    return "\n".join(str(step.get("run", "")) for step in steps)


def test_each_native_runner_builds_with_the_repository_scripts_and_smoke_tests_the_result() -> None:
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    windows, macos = _script(jobs["windows"]), _script(jobs["macos"])
    assert jobs["windows"]["runs-on"].startswith("windows")
    assert all(runner.startswith("macos") for runner in jobs["macos"]["strategy"]["matrix"]["runner"])
    assert "installer\\windows\\build.ps1" in windows and "installer/macos/build-dmg.sh" in macos
    assert (REPO / "installer" / "windows" / "build.ps1").is_file()
    assert (REPO / "installer" / "macos" / "build-dmg.sh").is_file()
    for script in (windows, macos):
        assert "--version" in script and "--screenshot" in script
    assert "probe demo --json" in macos  # the simulated host runs on macOS, not on Windows
    assert "tests/packaging/test_windows_imports.py" in windows
