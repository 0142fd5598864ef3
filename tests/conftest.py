"""Test setup shared by every test.

- Tests never read the developer's own config: HOME, XDG dirs and GPUWS_CONFIG_DIR point into a
  temporary directory for each test.
- Qt renders offscreen.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Give every test its own config dir and an empty ~/.ssh, never the developer's."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("GPUWS_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("GPUWS_TEST_HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    # HOME too, so ~/.ssh/known_hosts and ~/.ssh/config are the test's own. The keyring is
    # reached through the D-Bus session address, which does not depend on HOME.
    monkeypatch.setenv("HOME", str(home))
    yield home


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[object]:
    """A real OpenSSH sshd on loopback with the simulated nvidia-smi first on its PATH."""
    from tests.support.sshd import SshdServer, install_sim_nvidia_smi

    bin_dir = tmp_path / "simhost" / "bin"
    install_sim_nvidia_smi(bin_dir)
    state_dir = tmp_path / "simhost" / "state"
    state_dir.mkdir(parents=True)
    server = SshdServer(
        tmp_path / "sshd",
        env={
            "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
            "GPUWS_SIM_STATE": str(state_dir),
        },
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run `async def` tests in a fresh event loop (no asyncio pytest plugin needed)."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(pyfuncitem.obj(**kwargs))
    return True


# -- markers applied by what a test uses, and skips outside the test command -------------------

# Set by scripts/_test-in-session.sh: there a missing service is a failure, never a skip.
IN_TEST_COMMAND = os.environ.get("GPUWS_TEST_SESSION") == "1"
_FIXTURE_MARKERS = {"sshd": "sshd", "qtbot": "gui", "make_window": "gui"}


def _sshd_missing() -> str | None:
    from tests.support.sshd import SSHD

    return None if os.access(SSHD, os.X_OK) else f"no OpenSSH sshd at {SSHD} (install openssh-server)"


def _xvfb_missing() -> str | None:
    from tests.support.xvfb import XVFB

    return None if XVFB is not None else "no Xvfb (install xvfb: scripts/install-deps.sh test)"


def _ssh_missing() -> str | None:
    import shutil

    return None if shutil.which("ssh") else "no OpenSSH client `ssh` (install openssh-client)"


def _keyring_missing() -> str | None:
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        return "no D-Bus session with a Secret Service (run under scripts/test.sh)"
    import keyring

    from gpuws.core.secrets import unusable_reason

    return unusable_reason(keyring.get_keyring())


# What a marked test needs; the test command installs each (scripts/install-deps.sh test).
_CHECKS = {"sshd": _sshd_missing, "keyring": _keyring_missing, "xvfb": _xvfb_missing, "ssh_client": _ssh_missing}
_MISSING: dict[str, str | None] = {}


def _missing(marker: str) -> str | None:
    if marker not in _MISSING:
        _MISSING[marker] = _CHECKS[marker]()
    return _MISSING[marker]


def pytest_runtest_setup(item: pytest.Item) -> None:
    """In the test command, a test whose part is missing fails with the reason, never skips: a
    fresh machine after the README's command would otherwise pass with those tests unrun."""
    if not IN_TEST_COMMAND:
        return
    for marker in _CHECKS:
        if item.get_closest_marker(marker) is not None and (reason := _missing(marker)) is not None:
            pytest.fail(f"{marker}: {reason}; the test command needs it (GPUWS_TEST_SESSION=1: "
                        "a missing part fails here, never skips)", pytrace=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests by the fixtures they use (sshd, gui), and outside the test command skip those
    whose part is missing, with the reason, instead of failing (as qutebrowser's conftest does)."""
    for item in items:
        for fixture, marker in _FIXTURE_MARKERS.items():
            if fixture in getattr(item, "fixturenames", ()) and item.get_closest_marker(marker) is None:
                item.add_marker(getattr(pytest.mark, marker))
        if IN_TEST_COMMAND:
            continue
        for marker in _CHECKS:
            if item.get_closest_marker(marker) is None:
                continue
            reason = _missing(marker)
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=f"{marker} test outside the test command: {reason}"))


@pytest.fixture(scope="module")
def sim_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, object]]:
    """4 simulated dcgm-exporters (4 GPUs each, one MIG GPU) scraped every 1 s by a real Prometheus.

    Yields (PrometheusServer, SimFleet). Module-scoped: starting Prometheus takes seconds.
    """
    from gpuws.sim.dcgm_exporter import SimFleet, make_hosts
    from tests.support.prometheus import start_prometheus

    fleet = SimFleet(make_hosts(4, 4, mig_every=3)).start()
    server = start_prometheus(tmp_path_factory.mktemp("prometheus"), fleet.targets)
    try:
        server.wait_scraped(targets=4, series_min=16 + 2)
        yield server, fleet
    finally:
        server.stop()
        fleet.stop()
