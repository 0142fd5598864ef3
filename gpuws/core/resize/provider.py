"""Cloud-provider resize: change the instance type through the provider's own CLI.

A resize is: stop, (wait until stopped), modify the instance type, start, (wait until running);
then the instance's address is read back from the provider ("describe", where the provider has one),
gpuws waits for SSH there, probes and checks the GPU against the type (`gpuws.app.cloud`).
Each action is an argv template with
`{instance_id}`, `{region}` and `{instance_type}` substituted inside single arguments (no shell,
so a value can never become a second command). Presets cover the AWS, Google Cloud, Alibaba
Cloud and Tencent Cloud CLIs; `ProviderInfo.commands` overrides any action per host.

The provider token comes from the keyring and reaches the CLI only through environment
variables (`token_environment`); it is never in argv, and plans show it as `***`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuws.core.errors import GpuwsError, ValidationError
from gpuws.core.models import ProviderInfo

MASK = "***"
ACTIONS = ("stop", "wait_stopped", "modify", "start", "wait_running", "describe")
# Run in this order by a resize; "describe" (read the instance's state, type and addresses) is
# asked before and after, where the provider has one (AWS today).
RESIZE_ACTIONS = ACTIONS[:5]
REQUIRED_ACTIONS = ("stop", "modify", "start")
PLACEHOLDERS = ("instance_id", "region", "instance_type")
_VALUE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")
_PLACEHOLDER_RE = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")


class ProviderError(GpuwsError):
    """A provider resize could not be planned or a provider command failed."""


Template = tuple[str, ...]

_AWS_REGION = ("--region", "{region}")
_TC_IDS = ("--InstanceIds", '["{instance_id}"]')

PRESETS: dict[str, dict[str, Template]] = {
    "aws": {
        "stop": ("aws", "ec2", "stop-instances", "--instance-ids", "{instance_id}", *_AWS_REGION),
        "wait_stopped": ("aws", "ec2", "wait", "instance-stopped", "--instance-ids", "{instance_id}", *_AWS_REGION),
        "modify": ("aws", "ec2", "modify-instance-attribute", "--instance-id", "{instance_id}",
                   "--instance-type", "Value={instance_type}", *_AWS_REGION),
        "start": ("aws", "ec2", "start-instances", "--instance-ids", "{instance_id}", *_AWS_REGION),
        "wait_running": ("aws", "ec2", "wait", "instance-running", "--instance-ids", "{instance_id}", *_AWS_REGION),
        "describe": ("aws", "ec2", "describe-instances", "--instance-ids", "{instance_id}", *_AWS_REGION,
                     "--output", "json"),
    },
    "gcp": {  # gcloud waits for stop/start to finish by itself
        "stop": ("gcloud", "compute", "instances", "stop", "{instance_id}", "--zone", "{region}", "--quiet"),
        "modify": ("gcloud", "compute", "instances", "set-machine-type", "{instance_id}",
                   "--machine-type", "{instance_type}", "--zone", "{region}", "--quiet"),
        "start": ("gcloud", "compute", "instances", "start", "{instance_id}", "--zone", "{region}", "--quiet"),
    },
    "alibaba": {
        "stop": ("aliyun", "ecs", "StopInstance", "--RegionId", "{region}", "--InstanceId", "{instance_id}"),
        "wait_stopped": ("aliyun", "ecs", "DescribeInstances", "--RegionId", "{region}",
                         "--InstanceIds", '["{instance_id}"]',
                         "--waiter", "expr=Instances.Instance[0].Status", "to=Stopped"),
        "modify": ("aliyun", "ecs", "ModifyInstanceSpec", "--RegionId", "{region}", "--InstanceId", "{instance_id}",
                   "--InstanceType", "{instance_type}"),
        "start": ("aliyun", "ecs", "StartInstance", "--RegionId", "{region}", "--InstanceId", "{instance_id}"),
        "wait_running": ("aliyun", "ecs", "DescribeInstances", "--RegionId", "{region}",
                         "--InstanceIds", '["{instance_id}"]',
                         "--waiter", "expr=Instances.Instance[0].Status", "to=Running"),
    },
    "tencent": {
        "stop": ("tccli", "cvm", "StopInstances", "--region", "{region}", *_TC_IDS),
        "wait_stopped": ("tccli", "cvm", "DescribeInstances", "--region", "{region}", *_TC_IDS,
                         "--waiter", '{"expr":"InstanceSet[0].InstanceState","to":"STOPPED"}'),
        "modify": ("tccli", "cvm", "ResetInstancesType", "--region", "{region}", *_TC_IDS,
                   "--InstanceType", "{instance_type}"),
        "start": ("tccli", "cvm", "StartInstances", "--region", "{region}", *_TC_IDS),
        "wait_running": ("tccli", "cvm", "DescribeInstances", "--region", "{region}", *_TC_IDS,
                         "--waiter", '{"expr":"InstanceSet[0].InstanceState","to":"RUNNING"}'),
    },
}

# Where each CLI reads credentials from the environment. A keyring token for a provider whose
# CLI needs two values is stored as "ID:SECRET".
TOKEN_ENV: dict[str, tuple[str, ...]] = {
    "aws": ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
    "gcp": ("CLOUDSDK_AUTH_ACCESS_TOKEN",),
    "alibaba": ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET"),
    "tencent": ("TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY"),
    "custom": ("GPUWS_PROVIDER_TOKEN",),
}


@dataclass(frozen=True)
class ProviderCommand:
    """One rendered provider action."""

    action: str
    argv: tuple[str, ...]

    def display(self, env_names: Sequence[str]) -> str:
        """The command as shown to people: credentials as `NAME=***`, never their value."""
        prefix = " ".join(f"{name}={MASK}" for name in env_names)
        return f"{prefix} {shlex.join(self.argv)}".strip()


@dataclass(frozen=True)
class ProviderPlan:
    """The commands that move the instance to `instance_type`."""

    kind: str
    instance_type: str
    commands: tuple[ProviderCommand, ...]
    env_names: tuple[str, ...]  # credential variables the commands get (values never shown)

    def command(self, action: str) -> ProviderCommand | None:
        """The rendered command of `action`, or None when the provider has none for it."""
        return next((c for c in self.commands if c.action == action), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": "provider",
            "provider": self.kind,
            "instance_type": self.instance_type,
            "destructive": True,
            "steps": [
                {"action": c.action, "argv": list(c.argv), "command": c.display(self.env_names), "destructive": True}
                for c in self.commands
            ],
        }


def templates_for(provider: ProviderInfo) -> dict[str, Template]:
    """The preset for `provider.kind` with the host's own command overrides applied."""
    kind = provider.kind or "custom"
    templates = dict(PRESETS.get(kind, {}))
    for action, argv in provider.commands.items():
        if action not in ACTIONS:
            raise ValidationError("provider.commands", f"unknown action {action!r}; use {', '.join(ACTIONS)}")
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ValidationError("provider.commands", f"{action}: give the command as a list of arguments")
        templates[action] = tuple(argv)
    missing = [a for a in REQUIRED_ACTIONS if a not in templates]
    if missing:
        raise ProviderError(
            f"no provider command for {', '.join(missing)}: set provider.kind to aws, gcp, alibaba or tencent, "
            "or configure provider.commands"
        )
    return templates


def plan_provider_resize(provider: ProviderInfo, instance_type: str) -> ProviderPlan:
    """Render every action for this host and target instance type (values checked, no shell)."""
    values = {"instance_id": provider.instance_id, "region": provider.region, "instance_type": instance_type}
    for name, value in values.items():
        if value is not None and not _VALUE_RE.match(value):
            raise ValidationError(name, "use letters, digits and . _ : / - only, starting with a letter or digit")
    templates = templates_for(provider)
    commands = [
        ProviderCommand(action, tuple(_render(arg, values) for arg in templates[action]))
        for action in ACTIONS
        if action in templates
    ]
    kind = provider.kind or "custom"
    return ProviderPlan(kind, instance_type, tuple(commands), TOKEN_ENV.get(kind, TOKEN_ENV["custom"]))


def _render(arg: str, values: Mapping[str, str | None]) -> str:
    def substitute(match: re.Match[str]) -> str:
        value = values[match.group(1)]
        if value is None:
            raise ValidationError(f"provider.{match.group(1)}", "is not set for this host")
        return value

    return _PLACEHOLDER_RE.sub(substitute, arg)


def token_environment(kind: str | None, token: str | None) -> dict[str, str]:
    """Environment variables carrying the provider token to the CLI (empty without a token)."""
    if not token:
        return {}
    names = TOKEN_ENV.get(kind or "custom", TOKEN_ENV["custom"])
    if len(names) == 1:
        return {names[0]: token}
    ident, sep, secret = token.partition(":")
    if not sep or not ident or not secret:
        raise ProviderError(f"the {kind} token in the keyring must be stored as ID:SECRET")
    return {names[0]: ident, names[1]: secret}


def redact(text: str, secrets: Sequence[str]) -> str:
    """`text` with every secret (and each part of an ID:SECRET token) replaced by ***."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
