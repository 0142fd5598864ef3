"""What the provider says about one instance: its state, type and addresses (read, never dialled here).

A stop and start gives most cloud instances a new public address (AWS, Google Cloud and Alibaba
Cloud without an elastic IP), so after every start gpuws asks the provider again and the profile's
`host` follows the address the profile chose (`ProviderInfo.address_from`). Parsed from the JSON of
`aws ec2 describe-instances --output json` (the AWS CLI's own shape, `Reservations[].Instances[]`);
bad input is a ParseError naming the field, never a crash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

from gpuws.core.errors import ParseError
from gpuws.core.models import AddressFrom

MAX_DESCRIBE_BYTES = 4 * 1024 * 1024  # one instance's JSON is a few KiB


class InstanceState(StrEnum):
    """EC2's instance states (`State.Name`)."""

    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    SHUTTING_DOWN = "shutting-down"
    TERMINATED = "terminated"


@dataclass(frozen=True)
class InstanceView:
    """One instance as the provider describes it now."""

    instance_id: str
    state: InstanceState
    instance_type: str
    public_ip: str | None
    private_ip: str | None
    public_dns: str | None

    def address(self, source: AddressFrom) -> str | None:
        """The address the profile reaches the host at (None: the provider gives none of that kind)."""
        return {AddressFrom.PUBLIC: self.public_ip, AddressFrom.PRIVATE: self.private_ip,
                AddressFrom.DNS: self.public_dns}[source]


class NoAddress(ParseError):
    """The running instance has no address of the kind the profile reads."""


def _text(instance: dict[str, object], key: str, where: str) -> str | None:
    value = instance.get(key)
    if value is None or value == "":  # EC2 gives "" for a public DNS name it has not assigned
        return None
    if not isinstance(value, str) or len(value) > 255:
        raise ParseError(f"{where}.{key}: expected a string of at most 255 characters")
    return value


def parse_aws_describe(text: str, instance_id: str) -> InstanceView:
    """Instance `instance_id` from `aws ec2 describe-instances --output json`."""
    if len(text) > MAX_DESCRIBE_BYTES:
        raise ParseError(f"describe-instances: answer over {MAX_DESCRIBE_BYTES} bytes")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"describe-instances: not JSON (line {getattr(exc, 'lineno', '?')}): {exc}") from None
    reservations = doc.get("Reservations") if isinstance(doc, dict) else None
    if not isinstance(reservations, list):
        raise ParseError("describe-instances: Reservations: expected a list")
    for r, reservation in enumerate(reservations):
        instances = reservation.get("Instances") if isinstance(reservation, dict) else None
        if not isinstance(instances, list):
            raise ParseError(f"describe-instances: Reservations[{r}].Instances: expected a list")
        for i, instance in enumerate(instances):
            where = f"describe-instances: Reservations[{r}].Instances[{i}]"
            if not isinstance(instance, dict):
                raise ParseError(f"{where}: expected an object")
            if instance.get("InstanceId") != instance_id:
                continue
            state = instance.get("State")
            name = state.get("Name") if isinstance(state, dict) else None
            try:
                parsed_state = InstanceState(str(name))
            except ValueError:
                raise ParseError(f"{where}.State.Name: {str(name)[:40]!r} is not an EC2 instance state") from None
            itype = _text(instance, "InstanceType", where)
            if itype is None:
                raise ParseError(f"{where}.InstanceType: missing")
            return InstanceView(instance_id, parsed_state, itype, _text(instance, "PublicIpAddress", where),
                                _text(instance, "PrivateIpAddress", where), _text(instance, "PublicDnsName", where))
    raise ParseError(f"describe-instances: no instance {instance_id[:40]!r} in the answer")
