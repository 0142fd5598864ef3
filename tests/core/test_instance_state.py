"""The instance's state, type and addresses from `aws ec2 describe-instances` (real CLI captures,
tests/fixtures/aws/README.md); bad answers are a ParseError naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuws.core.errors import ParseError
from gpuws.core.models import AddressFrom
from gpuws.core.resize.instance_state import InstanceState, parse_aws_describe

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "aws"
INSTANCE = "i-7bb6a539a63cf94e9"


def test_a_running_instance_gives_each_address() -> None:
    view = parse_aws_describe((FIXTURES / "describe-instances-running.json").read_text(), INSTANCE)
    assert (view.state, view.instance_type) == (InstanceState.RUNNING, "g6f.large")
    assert view.address(AddressFrom.PUBLIC) == "54.214.206.31"
    assert view.address(AddressFrom.PRIVATE) == "127.0.0.10"
    assert view.address(AddressFrom.DNS) == "ec2-54-214-206-31.us-east-2.compute.amazonaws.com"


def test_a_stopped_instance_has_no_public_address() -> None:
    view = parse_aws_describe((FIXTURES / "describe-instances-stopped.json").read_text(), INSTANCE)
    assert view.state is InstanceState.STOPPED
    assert view.address(AddressFrom.PUBLIC) is None and view.address(AddressFrom.DNS) is None
    assert view.address(AddressFrom.PRIVATE) == "127.0.0.10"


@pytest.mark.parametrize(("change", "where"), [
    (lambda d: d["Reservations"][0]["Instances"][0]["State"].update(Name="melting"), "State.Name"),
    (lambda d: d["Reservations"][0]["Instances"][0].pop("InstanceType"), "InstanceType"),
    (lambda d: d["Reservations"][0]["Instances"][0].update(PublicIpAddress=7), "PublicIpAddress"),
    (lambda d: d["Reservations"][0].update(Instances={}), "Reservations[0].Instances"),
    (lambda d: d["Reservations"][0]["Instances"][0].update(InstanceId="i-other"), "no instance"),
])
def test_bad_answers_name_the_field(change: object, where: str) -> None:
    doc = json.loads((FIXTURES / "describe-instances-running.json").read_text())
    change(doc)  # type: ignore[operator]
    with pytest.raises(ParseError) as refused:
        parse_aws_describe(json.dumps(doc), INSTANCE)
    assert where in str(refused.value)


def test_not_json_and_too_big_are_refused() -> None:
    with pytest.raises(ParseError, match="not JSON"):
        parse_aws_describe("An error occurred (AuthFailure)", INSTANCE)
    with pytest.raises(ParseError, match="over"):
        parse_aws_describe(" " * (4 * 1024 * 1024 + 1), INSTANCE)
