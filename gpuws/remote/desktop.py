"""Run the desktop agent (`gpuws/agent/desktop_agent.py`) on a host, and tmux for `gpuws shell`.

The agent goes as `python3 -c SCRIPT ACTION ...`; the VNC password, when there is one, only ever
travels on the agent's stdin (the host writes it with `vncpasswd -f`), never in a command line.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from gpuws.core.desktop import (
    TMUX_LIST_FORMAT,
    TMUX_SESSION,
    DesktopCheck,
    DesktopError,
    RunningDesktop,
    TmuxWindow,
    parse_check,
    parse_started,
    parse_tmux_windows,
)
from gpuws.core.runner import CommandResult, CommandRunner

CHECK_TIMEOUT = 60.0
START_TIMEOUT = 60.0


def agent_source() -> str:
    """The agent script sent to the host's python3."""
    return resources.files("gpuws.agent").joinpath("desktop_agent.py").read_text(encoding="utf-8")


def _answer(result: CommandResult, action: str) -> dict[str, Any]:
    """The agent's one JSON object (its last line of output)."""
    lines = [line for line in result.stdout.splitlines() if line.strip().startswith("{")]
    if not lines:
        if result.exit_status == 127 or ("python3" in result.stderr and "not found" in result.stderr):
            raise DesktopError("desktop: the host has no python3 (gpuws's desktop agent needs it)")
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise DesktopError(f"desktop {action}: the host's agent failed: {tail}")
    try:
        raw = json.loads(lines[-1])
    except ValueError:
        raise DesktopError(f"desktop {action}: the host's agent answered something that is not JSON") from None
    if not isinstance(raw, dict):
        raise DesktopError(f"desktop {action}: the host's agent answered something that is not an object")
    return raw


async def _agent(runner: CommandRunner, action: str, *args: str, input: str | None = None,
                 timeout: float = CHECK_TIMEOUT) -> dict[str, Any]:
    result = await runner.run(["python3", "-c", agent_source(), action, *args], input=input, timeout=timeout)
    return _answer(result, action)


async def check_desktop(runner: CommandRunner, *, display: int | None = None, simulated: bool = False) -> DesktopCheck:
    """What the host can serve (VNC servers, VirtualGL, sessions, the renderer, NVENC...)."""
    args = ("--display", str(display)) if display is not None else ()
    return parse_check(await _agent(runner, "check", *args), simulated=simulated)


async def start_desktop(runner: CommandRunner, password: str, *, geometry: str, display: int | None) -> RunningDesktop:
    """Start the user's desktop on the host, or reuse the running one (its password file rewritten)."""
    args = ["--geometry", geometry]
    if display is not None:
        args += ["--display", str(display)]
    return parse_started(await _agent(runner, "start", *args, input=password + "\n", timeout=START_TIMEOUT))


async def stop_desktop(runner: CommandRunner) -> bool:
    """End the user's gpuws desktop on the host; True when one was running."""
    return bool((await _agent(runner, "stop")).get("stopped"))


async def start_web(runner: CommandRunner) -> int:
    """websockify + noVNC on the host's loopback in front of the running desktop; its port."""
    raw = await _agent(runner, "web", timeout=START_TIMEOUT)
    port = raw.get("web_port")
    if raw.get("error") or not isinstance(port, int):
        raise DesktopError(f"desktop (browser): {raw.get('error') or 'no port in the answer'}")
    return port


async def install_packages(runner: CommandRunner, command: str, timeout: float = 900.0) -> CommandResult:
    """Run `command` (from `DesktopCheck.install_command`) as root through `sudo -n` (never a prompt)."""
    return await runner.run(["sudo", "-n", "sh", "-c", command], timeout=timeout)


# -- tmux ---------------------------------------------------------------------------------------------


async def has_tmux(runner: CommandRunner) -> bool:
    """Whether the host has tmux on its PATH."""
    result = await runner.run(["sh", "-c", "command -v tmux"], timeout=30)
    return result.ok and bool(result.stdout.strip())


async def ensure_tmux_session(runner: CommandRunner) -> None:
    """The host's `gpuws` tmux session exists afterwards (created detached when it did not)."""
    result = await runner.run(["sh", "-c", 'tmux has-session -t "$1" 2>/dev/null || tmux new-session -d -s "$1"',
                               "gpuws-tmux", TMUX_SESSION], timeout=30)
    if not result.ok:
        raise DesktopError(f"tmux: cannot create the {TMUX_SESSION} session: {result.stderr.strip()[:300]}")


async def list_windows(runner: CommandRunner) -> list[TmuxWindow]:
    """The windows of the host's `gpuws` tmux session (empty when there is none)."""
    result = await runner.run(["tmux", "list-windows", "-t", TMUX_SESSION, "-F", TMUX_LIST_FORMAT], timeout=30)
    return parse_tmux_windows(result.stdout) if result.ok else []
