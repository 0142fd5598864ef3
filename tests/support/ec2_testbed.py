"""The EC2 test bed: moto's EC2 server, and in front of it the hypervisor of the emulated instances.

`moto_server` (PyPI `moto[server]`) answers the EC2 API exactly as the real `aws` CLI expects it;
gpuws is pointed at it with `AWS_ENDPOINT_URL`. What moto cannot do is be the machines: the
`Hypervisor` here is a small HTTP pass-through in front of moto (every request is forwarded
unchanged, as tests/support/tenant_proxy.py forwards to a real Prometheus) that plays the physical
side of each action:

- when an instance stops, its host goes down (the demo host at its address is killed);
- when it starts, a demo host comes up at its address (`gpuws demo-host --bind 127.0.0.K --gpus
  l4/8`, the GPU its type gives, from the catalog), after a boot delay as a real instance has;
- for an instance that reads its public address, each start associates a new elastic IP taken from
  127.0.1.0/24 (moto's `allocate-address --address`), so the address changes across a start as an
  instance without an elastic IP does on AWS, and stays on loopback;
- a start of a type listed in `no_capacity` is answered with EC2's own error
  `InsufficientInstanceCapacity` (HTTP 500, EC2's XML error shape) instead of being forwarded:
  moto has no way to make a start fail, and capacity is exactly what a hypervisor pool runs out
  of, so the refusal is played here, where the machines are;
- an action in `hold` waits (a test kills gpuws meanwhile) and is then dropped, never reaching moto.

Instances get loopback addresses: a VPC of 127.0.0.0/16, private IPs 127.0.0.K. moto's own public
addresses (54.x, random per start) are read by gpuws and never dialled (see loopback_guard).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.sshd import free_port

REGION = "us-east-2"  # the catalog has on-demand prices for every g6f/g6 type here
BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
PASSWORD = "cloud-testbed-password-0123"
BOOT_DELAY_S = 0.3  # a started instance takes a moment before its sshd listens

CAPACITY_ERROR = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>InsufficientInstanceCapacity</Code>'
    "<Message>We currently do not have sufficient {itype} capacity in the Availability Zone you requested "
    "(us-east-2a). Our system will be working on provisioning additional capacity. You can currently get "
    "{itype} capacity by not specifying an Availability Zone in your request or choosing us-east-2b, "
    "us-east-2c.</Message></Error></Errors><RequestID>{request}</RequestID></Response>"
)


def gpu_token(instance_type: str) -> str:
    """The `gpuws demo-host --gpus` token of the GPU an AWS type gives ("l4/8", "l4")."""
    from gpuws.core.resize.instance_types import instance_type as lookup

    itype = lookup("aws", instance_type)
    assert itype is not None, f"{instance_type} is not in the catalog"
    return "l4" if itype.whole_card else f"l4/{itype.fraction.denominator}"


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    """`moto_server` on 127.0.0.1 at a free port; (process, URL) once it answers."""
    port = free_port()
    proc = subprocess.Popen([str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/moto-api/data.json", timeout=2):
                return proc, url
        except (urllib.error.URLError, ConnectionError, OSError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("moto_server did not start") from None
            time.sleep(0.1)


def stop_process(proc: subprocess.Popen[Any]) -> None:
    """End a process started here, with its group."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@dataclass
class Machine:
    """One emulated instance's hardware: where its demo host keeps state, whether it runs."""

    instance_id: str
    listen: str  # "private" or "public": the address its host listens at
    state_dir: Path
    proc: subprocess.Popen[str] | None = None
    address: str | None = None
    boots: int = 0
    eip: tuple[str, str] | None = None  # (allocation id, association id) while started


@dataclass
class Hypervisor:
    """The pass-through in front of moto that plays the machines (see the module docstring)."""

    moto_url: str
    root: Path
    ssh_port: int = field(default_factory=free_port)
    no_capacity: set[str] = field(default_factory=set)
    gpu_override: dict[str, str] = field(default_factory=dict)  # type -> --gpus token (a wrong GPU)
    hold: dict[str, threading.Event] = field(default_factory=dict)  # action -> released (then dropped)
    arrived: dict[str, threading.Event] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)
    access_keys: list[str] = field(default_factory=list)  # the key id each request was signed with
    machines: dict[str, Machine] = field(default_factory=dict)
    _server: ThreadingHTTPServer | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _next_eip: int = 1
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        import boto3

        # The test's own console to moto (straight to it, not through the hypervisor).
        self.ec2: Any = boto3.client("ec2", endpoint_url=self.moto_url, region_name=REGION,
                                     aws_access_key_id="console", aws_secret_access_key="console")

    # -- the cloud console --------------------------------------------------------------------------

    def network(self) -> tuple[str, str]:
        """A VPC of 127.0.0.0/16 with two subnets: 127.0.0.0/24 gives moto's own (random, never
        dialled) public addresses, 127.0.2.0/24 none (its instances get elastic IPs here)."""
        vpc = self.ec2.create_vpc(CidrBlock="127.0.0.0/16")["Vpc"]["VpcId"]
        public = self.ec2.create_subnet(VpcId=vpc, CidrBlock="127.0.0.0/24")["Subnet"]["SubnetId"]
        self.ec2.modify_subnet_attribute(SubnetId=public, MapPublicIpOnLaunch={"Value": True})
        private = self.ec2.create_subnet(VpcId=vpc, CidrBlock="127.0.2.0/24")["Subnet"]["SubnetId"]
        return public, private

    def launch(self, subnet: str, private_ip: str, instance_type: str, *, listen: str = "private") -> str:
        """Run an instance at `private_ip`; its host boots (returns once it listens)."""
        image = self.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        reply = self.ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType=instance_type,
                                       SubnetId=subnet, PrivateIpAddress=private_ip)
        instance_id: str = reply["Instances"][0]["InstanceId"]
        machine = Machine(instance_id, listen, self.root / instance_id)
        machine.state_dir.mkdir(parents=True)
        # The login survives restarts (the demo host keeps the password it finds in its state dir).
        (machine.state_dir / "demo_password").write_text(PASSWORD + "\n", encoding="ascii")
        self.machines[instance_id] = machine
        self._power_on(machine, delay=0.0)
        return instance_id

    def describe(self, instance_id: str) -> dict[str, Any]:
        """moto's view of the instance."""
        reservations = self.ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        found: dict[str, Any] = reservations[0]["Instances"][0]
        return found

    # -- the machines -------------------------------------------------------------------------------

    def _power_on(self, machine: Machine, delay: float = BOOT_DELAY_S) -> None:
        if machine.listen == "public":
            with self._lock:
                address = f"127.0.1.{self._next_eip}"
                self._next_eip += 1
            allocation = self.ec2.allocate_address(Domain="vpc", Address=address)["AllocationId"]
            association = self.ec2.associate_address(AllocationId=allocation,
                                                     InstanceId=machine.instance_id)["AssociationId"]
            machine.eip = (allocation, association)
        instance = self.describe(machine.instance_id)
        machine.address = instance["PrivateIpAddress"] if machine.listen == "private" else instance["PublicIpAddress"]
        itype = instance["InstanceType"]
        token = self.gpu_override.get(itype) or gpu_token(itype)
        time.sleep(delay)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        machine.proc = subprocess.Popen(
            [sys.executable, "-m", "gpuws", "demo-host", "--bind", str(machine.address), "--port",
             str(self.ssh_port), "--gpus", token, "--state-dir", str(machine.state_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, start_new_session=True)
        assert machine.proc.stdout is not None
        line = machine.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the demo host of {machine.instance_id} did not start")
        json.loads(line)
        machine.boots += 1

    def _halt(self, machine: Machine) -> None:
        if machine.proc is not None:
            stop_process(machine.proc)
            if machine.proc.stdout is not None:
                machine.proc.stdout.close()
            machine.proc = None
        if machine.eip is not None:
            allocation, association = machine.eip
            self.ec2.disassociate_address(AssociationId=association)
            self.ec2.release_address(AllocationId=allocation)
            machine.eip = None

    def _after(self, action: str, ids: list[str]) -> None:
        for instance_id in ids:
            machine = self.machines.get(instance_id)
            if machine is None:
                continue
            if action == "StopInstances":
                self._halt(machine)
            elif action == "StartInstances":
                thread = threading.Thread(target=self._power_on, args=(machine,), daemon=True)
                self._threads.append(thread)
                thread.start()

    # -- the pass-through ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """What `AWS_ENDPOINT_URL` points at."""
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Hypervisor:
        bed = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                params = urllib.parse.parse_qs(body.decode())
                action = params.get("Action", [""])[0]
                ids = [v[0] for k, v in sorted(params.items()) if k.startswith("InstanceId")]
                bed.actions.append(action)
                credential = self.headers.get("Authorization", "").partition("Credential=")[2]
                bed.access_keys.append(credential.split("/", 1)[0])
                if action in bed.hold:
                    bed.arrived.setdefault(action, threading.Event()).set()
                    bed.hold[action].wait(120)
                    self.close_connection = True  # dropped: it never reaches EC2
                    return
                if action == "StartInstances":
                    for instance_id in ids:
                        itype = bed.describe(instance_id)["InstanceType"]
                        if itype in bed.no_capacity:
                            text = CAPACITY_ERROR.format(itype=itype, request=f"gpuws-testbed-{time.time_ns()}")
                            self._answer(500, text.encode(), "text/xml")
                            return
                request = urllib.request.Request(bed.moto_url + self.path, data=body, method="POST")
                for name, value in self.headers.items():
                    if name.lower() not in ("host", "content-length", "connection"):
                        request.add_header(name, value)
                try:
                    with urllib.request.urlopen(request, timeout=60) as response:
                        status, answer = response.status, response.read()
                        kind = response.headers.get("Content-Type", "")
                except urllib.error.HTTPError as exc:
                    status, answer, kind = exc.code, exc.read(), exc.headers.get("Content-Type", "")
                if status == 200:
                    bed._after(action, ids)
                self._answer(status, answer, kind)

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                if content_type:
                    self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True,
                                  name="ec2-hypervisor")
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Release held requests, stop the pass-through and every machine."""
        for event in self.hold.values():
            event.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=30)
        for machine in self.machines.values():
            if machine.proc is not None:
                stop_process(machine.proc)
                if machine.proc.stdout is not None:
                    machine.proc.stdout.close()


def argv_recorder(directory: Path, log: Path) -> Path:
    """A directory with an `aws` that appends its argv to `log`, then runs the real CLI: put it
    first on PATH to see every argv gpuws gave the CLI."""
    directory.mkdir(parents=True, exist_ok=True)
    real = shutil.which("aws", path=str(BIN)) or str(BIN / "aws")
    script = directory / "aws"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    return directory
