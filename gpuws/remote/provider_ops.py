"""Start and stop an instance through the provider's CLI, with the same templates as resize.

`gpuws start NAME` runs the `start` (then `wait_running`) action of the host's provider
templates here, on this machine; `gpuws stop NAME` first runs an optional pre-stop command on
the host (e.g. save a checkpoint) and then `stop` (then `wait_stopped`). The token reaches the
provider CLI only through its environment, and every message is redacted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuws.core.errors import GpuwsError, ValidationError
from gpuws.core.models import ProviderInfo
from gpuws.core.resize.provider import (
    PRESETS,
    TOKEN_ENV,
    ProviderCommand,
    ProviderError,
    redact,
    token_environment,
)
from gpuws.core.runner import CommandRunner, CommandTimeout, LocalRunner

POWER_ACTIONS: dict[str, tuple[str, ...]] = {"start": ("start", "wait_running"), "stop": ("stop", "wait_stopped")}
_VALUE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/-")

ProgressLine = Callable[[str], None]


@dataclass(frozen=True)
class PowerPlan:
    """The provider commands that start or stop one instance."""

    kind: str
    action: str  # "start" or "stop"
    commands: tuple[ProviderCommand, ...]
    env_names: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.kind,
            "action": self.action,
            "steps": [{"action": c.action, "command": c.display(self.env_names)} for c in self.commands],
        }


@dataclass
class PowerResult:
    """What a start or stop did; after a start where the provider can describe the instance, the
    address it had and the one read back (the profile follows a new one)."""

    action: str
    ok: bool
    error: str | None = None
    log: list[str] = field(default_factory=list)
    address_before: str | None = None
    address_after: str | None = None

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, object] = {"action": self.action, "ok": self.ok, "error": self.error, "log": self.log}
        if self.address_after is not None:
            doc.update(address_before=self.address_before, address_after=self.address_after)
        return doc


def _check_value(name: str, value: str | None) -> str:
    if value is None:
        raise ValidationError(f"provider.{name}", "is not set for this host")
    if not value or value[0] in "._:/-" or len(value) > 128 or not set(value) <= _VALUE_CHARS:
        raise ValidationError(f"provider.{name}",
                              "use letters, digits and . _ : / - only, starting with a letter or digit")
    return value


def plan_power(provider: ProviderInfo, action: str) -> PowerPlan:
    """Render the start or stop commands for this host (resize presets, host overrides applied).

    Unlike a resize, only the power actions are needed, so a custom provider with just
    `start`/`stop` templates is enough.
    """
    if action not in POWER_ACTIONS:
        raise ValidationError("action", "use start or stop")
    kind = provider.kind or "custom"
    templates: dict[str, Sequence[str]] = dict(PRESETS.get(kind, {}))
    templates.update({a: argv for a, argv in provider.commands.items() if a in POWER_ACTIONS[action]})
    if action not in templates:
        raise ProviderError(
            f"no provider command to {action} this host: set provider.kind to aws, gcp, alibaba or tencent, "
            f"or configure provider.commands.{action}"
        )
    values = {"instance_id": provider.instance_id, "region": provider.region}
    commands: list[ProviderCommand] = []
    for step in POWER_ACTIONS[action]:
        if step not in templates:
            continue
        rendered: list[str] = []
        for arg in templates[step]:
            if "{instance_type}" in arg:
                raise ValidationError(f"provider.commands.{step}", "{instance_type} only belongs in modify")
            for name, value in values.items():
                if "{" + name + "}" in arg:
                    arg = arg.replace("{" + name + "}", _check_value(name, value))
            rendered.append(arg)
        commands.append(ProviderCommand(step, tuple(rendered)))
    return PowerPlan(kind, action, tuple(commands), TOKEN_ENV.get(kind, TOKEN_ENV["custom"]))


async def run_power(
    plan: PowerPlan,
    *,
    token: str | None,
    runner: CommandRunner | None = None,
    pre_stop: Sequence[str] | None = None,
    host_runner: CommandRunner | None = None,
    progress: ProgressLine | None = None,
    timeout: float = 900.0,
) -> PowerResult:
    """Run the plan's commands here (token only in their environment).

    For a stop, `pre_stop` (an argv) runs first on the host through `host_runner`; if it fails the
    instance is NOT stopped (a checkpoint that did not save is worth more than the hour).
    """
    report = progress or (lambda _line: None)
    local = runner or LocalRunner()
    env = token_environment(plan.kind, token)
    secrets = [token or "", *env.values()]
    result = PowerResult(plan.action, True)
    try:
        if plan.action == "stop" and pre_stop:
            if host_runner is None:
                raise ProviderError("the pre-stop command needs a connection to the host")
            report("running the pre-stop command on the host")
            try:
                out = await host_runner.run(list(pre_stop), timeout=timeout)
            except CommandTimeout:
                raise ProviderError(f"the pre-stop command did not finish within {timeout:g} s; not stopping") from None
            result.log.append(f"pre-stop -> exit {out.exit_status}")
            if not out.ok:
                first = (out.stderr.strip() or out.stdout.strip()).splitlines()[:1]
                why = first[0] if first else f"exit {out.exit_status}"
                raise ProviderError(f"the pre-stop command failed ({why}); not stopping")
        for command in plan.commands:
            shown = command.display(plan.env_names)
            report(shown)
            try:
                out = await local.run(list(command.argv), timeout=timeout, env=env)
            except (CommandTimeout, OSError) as exc:
                raise ProviderError(f"{command.action} failed: {exc}") from None
            result.log.append(redact(f"$ {shown} -> exit {out.exit_status}", secrets))
            if not out.ok:
                first = (out.stderr.strip() or out.stdout.strip()).splitlines()[:1]
                raise ProviderError(f"{command.action} failed: {first[0] if first else f'exit {out.exit_status}'}")
    except GpuwsError as exc:
        result.ok = False
        result.error = redact(str(exc), secrets)
    return result


@dataclass(frozen=True)
class CliCall:
    """One provider CLI call and how long it took (the benchmark splits a resize by these)."""

    action: str
    seconds: float
    exit_status: int


class ProviderCli:
    """Runs a provider's rendered commands here, one at a time: the token only in the child's
    environment (never argv), every line it returns or logs redacted, each call timed."""

    def __init__(self, kind: str, env_names: Sequence[str], token: str | None, *,
                 runner: CommandRunner | None = None, timeout: float = 900.0) -> None:
        self.env_names = tuple(env_names)
        self.env = token_environment(kind, token)
        self._secrets = [token or "", *self.env.values()]
        self._runner = runner or LocalRunner()
        self.timeout = timeout
        self.log: list[str] = []
        self.calls: list[CliCall] = []

    def redact(self, text: str) -> str:
        """`text` without the token or any part of it."""
        return redact(text, self._secrets)

    async def run(self, command: ProviderCommand) -> str:
        """Run `command`; its stdout, or ProviderError with the CLI's first line (redacted)."""
        import time

        shown = command.display(self.env_names)
        started = time.perf_counter()
        try:
            out = await self._runner.run(list(command.argv), timeout=self.timeout, env=self.env)
        except (CommandTimeout, OSError) as exc:
            self.calls.append(CliCall(command.action, time.perf_counter() - started, -1))
            raise ProviderError(self.redact(f"{command.action} failed: {exc}")) from None
        self.calls.append(CliCall(command.action, time.perf_counter() - started, out.exit_status))
        self.log.append(self.redact(f"$ {shown} -> exit {out.exit_status}"))
        if not out.ok:
            lines = [line for line in (out.stderr.strip() or out.stdout.strip()).splitlines() if line.strip()]
            why = lines[0][:300] if lines else f"exit {out.exit_status}"
            raise ProviderError(self.redact(f"{command.action} failed: {why}"))
        return out.stdout
