"""`gpuws resize NAME type:T`, `--recover`, `start`/`stop` against a real EC2 API: moto's EC2 server
driven by the real `aws` CLI, the emulated instances' hosts played by demo hosts on loopback
(tests/support/ec2_testbed.py). gpuws runs as the user runs it (a process of its own), with the
loopback guard loaded, so any dial outside 127.0.0.0/8 and ::1 fails and is logged."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keyring
import pytest

from gpuws.core.models import AddressFrom, AuthMethod, HostProfile, ProviderInfo, SecretKind
from gpuws.core.paths import data_dir
from gpuws.core.profiles import ProfileStore
from gpuws.core.resize.audit import AuditLog
from gpuws.core.secrets import SecretStore
from tests.support import ec2_testbed
from tests.support.ec2_testbed import PASSWORD, REGION, REPO, Hypervisor

pytestmark = [pytest.mark.keyring, pytest.mark.slow]

GUARD = Path(__file__).resolve().parents[1] / "support" / "loopback_guard"


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    """moto's EC2 server on 127.0.0.1 (a free port), one per test module."""
    proc, url = ec2_testbed.start_moto()
    try:
        yield url
    finally:
        ec2_testbed.stop_process(proc)


@pytest.fixture
def bed(moto: str, tmp_path: Path) -> Iterator[Hypervisor]:
    """The hypervisor in front of moto, and its machines, for one test."""
    hypervisor = Hypervisor(moto, tmp_path / "machines").start()
    try:
        yield hypervisor
    finally:
        hypervisor.stop()


@dataclass
class Cloud:
    """One cloud host of a test: its profile name, instance, token, and how to run gpuws."""

    name: str
    instance_id: str
    token_id: str
    token_secret: str
    bed: Hypervisor
    env: dict[str, str]
    argv_log: Path
    dial_log: Path

    def gpuws(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """`gpuws ARGS` as the user runs it (its own process), with the test bed's environment."""
        return subprocess.run([sys.executable, "-m", "gpuws", *args], env=self.env, capture_output=True,
                              text=True, timeout=timeout, check=False)

    def profile(self) -> HostProfile:
        """The saved profile now."""
        return ProfileStore().get(self.name)

    def refused_dials(self) -> str:
        """What the loopback guard refused ("" when gpuws dialled loopback only)."""
        return self.dial_log.read_text() if self.dial_log.exists() else ""


def _cloud(bed: Hypervisor, tmp_path: Path, itype: str, *, listen: str = "private") -> Cloud:
    public_subnet, private_subnet = bed.network()
    octet = 10 + len(bed.machines)
    subnet, ip = (public_subnet, f"127.0.0.{octet}") if listen == "private" else (private_subnet, f"127.0.2.{octet}")
    instance_id = bed.launch(subnet, ip, itype, listen=listen)
    address = bed.machines[instance_id].address
    assert address is not None
    name = f"cloud-{uuid.uuid4().hex[:10]}"
    ProfileStore().add(HostProfile(
        name=name, host=address, port=bed.ssh_port, user="demo", auth=AuthMethod.PASSWORD,
        provider=ProviderInfo(kind="aws", instance_id=instance_id, region=REGION,
                              address_from=AddressFrom.PRIVATE if listen == "private" else None),
        slice_profile=itype, price_per_hour=1.0, currency="USD"))  # the catalog's prices are USD
    token_id, token_secret = f"AKIA{uuid.uuid4().hex[:16].upper()}", f"sEcReT{uuid.uuid4().hex}"
    secrets = SecretStore()
    secrets.set(name, SecretKind.PASSWORD, PASSWORD)
    secrets.set(name, SecretKind.TOKEN, f"{token_id}:{token_secret}")
    argv_log, dial_log = tmp_path / "aws-argv.log", tmp_path / "dials.log"
    recorder = ec2_testbed.argv_recorder(tmp_path / "recorder", argv_log)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({
        "PYTHONPATH": f"{GUARD}{os.pathsep}{REPO}",
        "PATH": f"{recorder}{os.pathsep}{ec2_testbed.BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "AWS_ENDPOINT_URL": bed.url,  # the user's own environment points the CLI at the endpoint
        "AWS_EC2_METADATA_DISABLED": "true",
        # EC2 answers a capacity refusal with HTTP 500, which the CLI would retry with backoff
        # before giving up the same way: one attempt keeps the test short.
        "AWS_MAX_ATTEMPTS": "1",
        "GPUWS_DIAL_LOG": str(dial_log),
    })
    return Cloud(name, instance_id, token_id, token_secret, bed, env, argv_log, dial_log)


@pytest.fixture
def clouds() -> Iterator[list[Cloud]]:
    """The test's cloud hosts; their keyring entries are removed afterwards."""
    made: list[Cloud] = []
    yield made
    for cloud in made:
        for kind in ("password", "token"):
            with contextlib.suppress(keyring.errors.KeyringError):
                keyring.delete_password("gpuws", f"{cloud.name}:{kind}")


def _resize(cloud: Cloud, target: str) -> tuple[int, dict[str, Any], str]:
    done = cloud.gpuws("resize", cloud.name, f"type:{target}", "--yes", "--json", "--accept-new")
    doc: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, doc, done.stderr


def _no_secret_anywhere(cloud: Cloud, *outputs: str) -> None:
    """The token's parts are in no argv, no output, and no file gpuws wrote; they reached the CLI
    (the requests were signed with the token's key id)."""
    argv = cloud.argv_log.read_text()
    assert "ec2" in argv  # the real CLI ran
    for secret in (cloud.token_id, cloud.token_secret):
        assert secret not in argv
        for text in outputs:
            assert secret not in text
        for root in (data_dir(), Path(os.environ["GPUWS_CONFIG_DIR"])):
            leaked = [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
            assert leaked == []
    assert cloud.token_id in cloud.bed.access_keys


def test_one_eighth_to_full_to_half(bed: Hypervisor, tmp_path: Path, clouds: list[Cloud]) -> None:
    cloud = _cloud(bed, tmp_path, "g6f.large")
    clouds.append(cloud)
    public_before = bed.describe(cloud.instance_id)["PublicIpAddress"]

    status, doc, err = _resize(cloud, "g6.xlarge")
    assert status == 0, err
    assert doc["outcome_kind"] == "verified"
    assert "NVIDIA L4" in doc["gpu_seen"] and "vGPU" not in doc["gpu_seen"]  # the whole card, passthrough
    assert [s["step"] for s in doc["steps"] if s["external"]][:6] == [
        "describe", "stop", "wait_stopped", "modify", "start", "wait_running"]
    profile = cloud.profile()
    assert (profile.slice_profile, profile.price_per_hour) == ("g6.xlarge", 0.8048)  # the catalog's us-east-2 price
    assert bed.describe(cloud.instance_id)["InstanceType"] == "g6.xlarge"

    status, doc, err = _resize(cloud, "g6f.4xlarge")
    assert status == 0, err
    assert "NVIDIA L4-12Q" in doc["gpu_seen"]
    profile = cloud.profile()
    assert (profile.slice_profile, profile.price_per_hour) == ("g6f.4xlarge", 0.95)
    assert profile.host == bed.machines[cloud.instance_id].address  # the private address, unchanged

    # moto gave the instance a new public address at each start: read, never dialled.
    public_after = bed.describe(cloud.instance_id)["PublicIpAddress"]
    assert public_after != public_before and not public_after.startswith("127.")
    assert cloud.refused_dials() == ""
    records = [r for r in AuditLog().read(cloud.name) if r.phase == "finished"]
    assert [(r.before, r.after, r.ok) for r in records] == [("g6f.large", "g6.xlarge", True),
                                                             ("g6.xlarge", "g6f.4xlarge", True)]


def test_start_refused_for_capacity_rolls_back(bed: Hypervisor, tmp_path: Path, clouds: list[Cloud]) -> None:
    cloud = _cloud(bed, tmp_path, "g6f.large")
    clouds.append(cloud)
    before = cloud.profile()
    bed.no_capacity.add("g6.xlarge")

    status, doc, err = _resize(cloud, "g6.xlarge")

    assert status == 9, err
    assert doc["outcome_kind"] == "rolled-back"
    assert "InsufficientInstanceCapacity" in doc["error"]
    assert doc["after"] == "g6f.large" and "NVIDIA L4-3Q" in doc["gpu_seen"]
    assert cloud.profile() == before  # type, price and address unchanged
    instance = bed.describe(cloud.instance_id)
    assert (instance["InstanceType"], instance["State"]["Name"]) == ("g6f.large", "running")
    last = [r for r in AuditLog().read(cloud.name) if r.phase == "finished"][-1]
    assert (last.backend, last.ok, last.after) == ("provider", False, "g6f.large")
    assert "rolled back" in last.outcome
    assert cloud.refused_dials() == ""


def test_gpu_not_the_types_fraction_is_named_and_rolled_back(bed: Hypervisor, tmp_path: Path,
                                                             clouds: list[Cloud]) -> None:
    cloud = _cloud(bed, tmp_path, "g6f.large")
    clouds.append(cloud)
    bed.gpu_override["g6f.4xlarge"] = "l4/4"  # the host shows a quarter where the type promises a half

    status, doc, err = _resize(cloud, "g6f.4xlarge")

    assert status == 9, err
    # Both named: what the host shows, and what the type promises.
    assert "NVIDIA L4-6Q" in doc["error"] and "6144 MiB" in doc["error"]
    assert "g6f.4xlarge" in doc["error"] and "12288 MiB" in doc["error"]
    assert cloud.profile().slice_profile == "g6f.large"
    assert bed.describe(cloud.instance_id)["InstanceType"] == "g6f.large"


def test_killed_resize_is_finished_by_recover(bed: Hypervisor, tmp_path: Path, clouds: list[Cloud]) -> None:
    import threading

    cloud = _cloud(bed, tmp_path, "g6f.large")
    clouds.append(cloud)
    bed.hold["ModifyInstanceAttribute"] = threading.Event()
    bed.arrived["ModifyInstanceAttribute"] = arrived = threading.Event()
    proc = subprocess.Popen([sys.executable, "-m", "gpuws", "resize", cloud.name, "type:g6f.2xlarge", "--yes",
                             "--json"], env=cloud.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        assert arrived.wait(120), "the resize never reached the modify"
        os.killpg(proc.pid, signal.SIGKILL)  # killed between the stop and the modify
    finally:
        proc.communicate(timeout=30)
        bed.hold.pop("ModifyInstanceAttribute").set()  # the held modify is dropped: it never reached EC2
    assert bed.describe(cloud.instance_id)["State"]["Name"] == "stopped"

    shown = cloud.gpuws("resize", cloud.name, "--recover", "--yes", "--json", "--accept-new")

    assert shown.returncode == 0, shown.stdout
    doc = json.loads(shown.stdout)
    assert doc["outcome_kind"] == "verified" and "NVIDIA L4-6Q" in doc["gpu_seen"]
    assert doc["recovered"]["target"] == "type:g6f.2xlarge"
    profile = cloud.profile()
    assert (profile.slice_profile, profile.price_per_hour) == ("g6f.2xlarge", 0.475)
    instance = bed.describe(cloud.instance_id)
    assert (instance["InstanceType"], instance["State"]["Name"]) == ("g6f.2xlarge", "running")
    again = cloud.gpuws("resize", cloud.name, "--recover", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["outcome"] == "nothing to recover"


def test_address_that_changes_across_the_start_is_followed(bed: Hypervisor, tmp_path: Path,
                                                           clouds: list[Cloud]) -> None:
    cloud = _cloud(bed, tmp_path, "g6f.large", listen="public")  # reads the public address (the default)
    clouds.append(cloud)
    first = cloud.profile().host
    assert first.startswith("127.0.1.")

    status, doc, err = _resize(cloud, "g6f.2xlarge")

    assert status == 0, err
    moved = cloud.profile().host
    assert moved != first and moved == bed.machines[cloud.instance_id].address
    assert (doc["address_before"], doc["address_after"]) == (first, moved)

    # `gpuws start` reads it back the same way.
    assert cloud.gpuws("stop", cloud.name).returncode == 0
    started = cloud.gpuws("start", cloud.name, "--json")
    assert started.returncode == 0, started.stderr
    after_start = json.loads(started.stdout)
    assert after_start["address_before"] == moved
    assert after_start["address_after"] == cloud.profile().host == bed.machines[cloud.instance_id].address != moved
    assert cloud.refused_dials() == ""


def test_provider_token_only_in_the_child_environment(bed: Hypervisor, tmp_path: Path, clouds: list[Cloud]) -> None:
    cloud = _cloud(bed, tmp_path, "g6f.large")
    clouds.append(cloud)

    resized = cloud.gpuws("resize", cloud.name, "type:g6f.xlarge", "--yes", "--accept-new")  # text output
    stopped = cloud.gpuws("stop", cloud.name, "--json")
    bed.no_capacity.add("g6f.xlarge")
    refused = cloud.gpuws("start", cloud.name, "--json")  # an error message from the CLI, redacted

    assert resized.returncode == 0, resized.stderr
    assert stopped.returncode == 0 and refused.returncode != 0
    assert "InsufficientInstanceCapacity" in refused.stdout + refused.stderr
    _no_secret_anywhere(cloud, *(p.stdout + p.stderr for p in (resized, stopped, refused)))


def test_loopback_guard_refuses_a_public_address(tmp_path: Path) -> None:
    """The guard these tests load: a dial to a public address (as moto's 54.x) fails and is logged."""
    log = tmp_path / "dials.log"
    code = ("import socket\ns = socket.socket()\ntry:\n    s.connect(('54.214.1.2', 22))\n"
            "except PermissionError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(GUARD),
                                                             "GPUWS_DIAL_LOG": str(log)},
                          capture_output=True, text=True, timeout=60, check=True)
    assert "refused to dial 54.214.1.2" in done.stdout
    assert "refused 54.214.1.2" in log.read_text()
