"""The demo SSH server: an asyncssh server on 127.0.0.1 that behaves like a GPU host.

Each exec (or shell) request runs as a local `/bin/sh -c CMD` in its own process group, with the
simulated `nvidia-smi` first on PATH, the fake `pynvml` first on PYTHONPATH and `GPUWS_SIM_STATE`
set, so the same commands, agent and runner work against it as against a real host. When the
channel closes or the client disconnects, the whole process group is killed: no orphans.

A session that asks for a terminal (`ssh -t`, `gpuws shell`) gets a real pseudo-terminal as its
controlling terminal, so tmux and shells behave as on a host. tmux keeps its socket under the
state directory (TMUX_TMPDIR), never in the machine's own /tmp/tmux-UID. Detached programs a
command starts (tmux, the desktop's Xvnc and window manager, Jupyter, TensorBoard) outlive the
connection, as on a real host, and an in-process demo host (the one a CLI command given NAME
`demo` starts, so the next command finds the desktop still there). `gpuws demo-host` ends them
all when it stops, by SIGTERM, SIGINT, SIGHUP or its parent's death (`serve_forever`).

How it finds them: every process it starts carries the host's GPUWS_SIM_STATE in its environment,
and so do their children (tmux's server, the desktop's Xvnc and session, a `setsid nohup` server):
`leftover_pids` scans /proc for it. Neither process groups nor PR_SET_PDEATHSIG in the children
would do: these programs leave their group on purpose (setsid, a daemon's double fork), and the
parent-death signal is cleared in every forked child (tmux's server is one). Its own parent's
death is seen by polling its parent pid (`watch_parent`), which runs the same stop.

The desktop parts are real (Xvnc, websockify, glxinfo of this machine); only VirtualGL is simulated:
a `vglrun` wrapper under which the `glxinfo` wrapper names the first simulated GPU as the renderer
(labelled SIMULATED). Host-wide faults: `no-vnc` takes the VNC servers off PATH, `software-gl`
leaves out the simulated VirtualGL so the desktop gets the machine's real llvmpipe.

Also served: SFTP (chrooted to `<state_dir>/files`) and direct-tcpip forwarding, only to loopback.
It is a simulation and says so in everything it prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import ipaddress
import json
import os
import pty
import secrets
import signal
import struct
import sys
import tempfile
import termios
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import asyncssh

from gpuws.core.errors import RefusedInput
from gpuws.core.models import AlertThresholds, AuthMethod, HostProfile
from gpuws.core.simulation import SIM_ENV_VAR, SIM_STATE_ENV_VAR
from gpuws.sim.faults import FAULTS_ENV, FaultKind, SimFault, faults_from_env, format_faults, has_host_fault
from gpuws.sim.health import check_faults
from gpuws.sim.jupyter import HOST_PID_ENV, is_simulated_jupyter
from gpuws.sim.models import DEFAULT_GPU_SPEC, parse_gpu_spec
from gpuws.sim.state import SIM_HOSTNAME, SimStateStore

HOST = "127.0.0.1"
DEMO_USER = "demo"
HOST_KEY_FILE = "ssh_host_ed25519_key"
# The login password, kept with the host key so a restart on the same --state-dir lets a saved
# profile (its password in the keyring) reconnect. Mode 0600, like the key; never printed but
# in the connection JSON line, as before.
PASSWORD_FILE = "demo_password"  # noqa: S105 (a file name, not a password)
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
LOOPBACK_NET = ipaddress.ip_network("127.0.0.0/8")


class BindRefused(RefusedInput):
    """`--bind` named an address outside 127.0.0.0/8: the demo host listens on loopback only."""


def loopback_bind(address: str) -> str:
    """`address` when it is an IPv4 address in 127.0.0.0/8 (the simulated host is reachable from
    this machine only, e.g. as a cloud instance's address in a test bed); else BindRefused."""
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        raise BindRefused(f"--bind: {address[:60]!r} is not an IP address; give one in 127.0.0.0/8") from None
    if ip not in LOOPBACK_NET:
        raise BindRefused(f"--bind: {ip} is outside 127.0.0.0/8; the simulated host listens on loopback only")
    return str(ip)
FAKE_NVML_DIR = Path(__file__).resolve().parent / "fake_nvml"
PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the directory holding `gpuws/`


@dataclass(frozen=True)
class DemoHostInfo:
    """How to reach a running demo host (printed as one JSON line by `gpuws demo-host`)."""

    host: str
    port: int
    user: str
    password: str
    host_key_fingerprint: str
    known_hosts_line: str
    state_dir: str

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "simulated": True})


def _install_bin(bin_dir: Path, faults: list[SimFault] | None = None) -> None:
    """Wrappers: the `nvidia-smi` emulator, a python that sees the fake NVML, `kill`/`ps` that
    know the simulated processes (gpuws.sim.procs), and a simulated Jupyter (gpuws.sim.jupyter)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrappers = {
        "nvidia-smi": f'#!/bin/sh\nexec "{sys.executable}" -m gpuws.sim.nvidia_smi "$@"\n',
        "python3": f'#!/bin/sh\nexec "{sys.executable}" "$@"\n',
        "kill": f'#!/bin/sh\nexec "{sys.executable}" -m gpuws.sim.procs kill "$@"\n',
        "ps": f'#!/bin/sh\nexec "{sys.executable}" -m gpuws.sim.procs ps "$@"\n',
        # The simulated host names itself, so its inventory never shows this machine's name.
        "hostname": f'#!/bin/sh\necho {SIM_HOSTNAME}\n',
        "jupyter": f'#!/bin/sh\nexec "{sys.executable}" -m gpuws.sim.jupyter "$@"\n',
        "jupyter-lab": f'#!/bin/sh\nexec "{sys.executable}" -m gpuws.sim.jupyter lab "$@"\n',
        # The simulated host's kernel log (boot lines and the XID faults it plays), never this machine's.
        "journalctl": f'#!/bin/sh\nexec "{sys.executable}" -m gpuws.sim.health journalctl "$@"\n',
        "dmesg": f'#!/bin/sh\nexec "{sys.executable}" -m gpuws.sim.health dmesg "$@"\n',
    }
    wrappers["glxinfo"] = _GLXINFO
    if has_host_fault(faults or [], FaultKind.SOFTWARE_GL):
        (bin_dir / "vglrun").unlink(missing_ok=True)
    else:
        wrappers["vglrun"] = _VGLRUN
    for name, text in wrappers.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)


# Simulated VirtualGL: `vglrun [options] CMD` runs CMD with the flag the glxinfo wrapper reads.
_VGLRUN = """#!/bin/sh
# SIMULATED VirtualGL (gpuws demo host)
while [ $# -gt 0 ]; do
  case "$1" in
    -d|-c|-q|-np|-fps|-gamma|-trans|-tr|-ms) shift; [ $# -gt 0 ] && shift ;;
    +*|-*) shift ;;
    *) break ;;
  esac
done
GPUWS_SIM_VGL=1 exec "$@"
"""
_GLXINFO = """#!/bin/sh
# Under the simulated VirtualGL: the first simulated GPU renders (SIMULATED); else the real glxinfo.
if [ "$GPUWS_SIM_VGL" = 1 ]; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0)
  echo "name of display: $DISPLAY"
  echo "direct rendering: Yes"
  echo "OpenGL vendor string: NVIDIA Corporation"
  echo "OpenGL renderer string: $gpu/PCIe/SSE2 (SIMULATED)"
  echo "OpenGL core profile version string: 4.6.0 NVIDIA 550.54.15 (SIMULATED)"
  exit 0
fi
PATH=${PATH#*:} exec glxinfo "$@"
"""
# What the no-vnc fault takes off the host's PATH.
VNC_PROGRAMS = frozenset({"Xvnc", "Xtigervnc", "vncserver", "tigervncserver", "x0vncserver", "x11vnc"})
SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")


def path_without(hidden: frozenset[str], farm: Path) -> Path:
    """A directory of links to every program of SYSTEM_PATH except `hidden` (first found wins)."""
    farm.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    for folder in SYSTEM_PATH:
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if entry.name in seen or entry.name in hidden:
                    continue
                seen.add(entry.name)
                link = farm / entry.name
                if not link.is_symlink():
                    with contextlib.suppress(OSError):
                        link.symlink_to(entry.path)
    for name in hidden:
        (farm / name).unlink(missing_ok=True)
    return farm


def _stop_simulated_jupyter(sim_dir: Path) -> None:
    for entry in (sim_dir / "jupyter-runtime").glob("*.json"):
        with contextlib.suppress(ValueError, KeyError, TypeError, OSError):
            pid = int(json.loads(entry.read_text())["pid"])
            if is_simulated_jupyter(pid):  # never a process that reused a stale entry's number
                os.kill(pid, signal.SIGTERM)
        entry.unlink(missing_ok=True)


def _kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class _DemoServer(asyncssh.SSHServer):
    """Password (and optional client key) auth; direct-tcpip only to loopback."""

    def __init__(self, password: str, client_keys: list[asyncssh.SSHKey], own: str = HOST) -> None:
        self._password = password
        self._client_keys = {k.public_data for k in client_keys}
        self._own = LOOPBACK_NAMES | {own}  # its own address as well, when bound elsewhere in 127/8

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return True

    def validate_password(self, username: str, password: str) -> bool:
        return username == DEMO_USER and secrets.compare_digest(password, self._password)

    def public_key_auth_supported(self) -> bool:
        return bool(self._client_keys)

    def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        return username == DEMO_USER and key.public_data in self._client_keys

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> bool:
        # Only the host's own services: the demo must never become an open proxy.
        return dest_host in self._own

    def server_requested(self, listen_host: str, listen_port: int) -> bool:
        return False


class DemoHost:
    """A simulated GPU host reachable over SSH on 127.0.0.1 (or another address in 127.0.0.0/8).

    `gpus` None keeps the GPUs of a state directory used before (the default spec on a new one);
    a spec naming other GPUs than the saved state's replaces them, as a hypervisor gives a
    restarted instance the GPU of its new type, while the host key and password stay.
    """

    def __init__(
        self,
        gpus: str | None = DEFAULT_GPU_SPEC,
        port: int = 0,
        state_dir: Path | None = None,
        client_keys: list[asyncssh.SSHKey] | None = None,
        faults: list[SimFault] | None = None,
        bind: str = HOST,
    ) -> None:
        # Refuse a bad spec before anything starts (None: the GPUs the state directory has).
        models = parse_gpu_spec(gpus) if gpus is not None else None
        self.bind = loopback_bind(bind)
        # Benchmark faults it plays (gpuws.sim.faults); by default those of GPUWS_SIM_FAULTS.
        self.faults = list(faults) if faults is not None else faults_from_env()
        if models is not None:
            check_faults(self.faults, models)  # and a fault it cannot play on the GPU it names
        self.gpus = gpus
        self.port = port
        self.state_dir = Path(state_dir) if state_dir else Path(tempfile.mkdtemp(prefix="gpuws-demo-host-"))
        self.client_keys = client_keys or []
        self.password = secrets.token_urlsafe(18)
        self._server: asyncssh.SSHAcceptor | None = None
        self._groups: set[int] = set()
        self._handlers: set[asyncio.Task[None]] = set()  # running command handlers
        self.info: DemoHostInfo | None = None

    @property
    def sim_dir(self) -> Path:
        return self.state_dir / "sim"

    @property
    def files_dir(self) -> Path:
        return self.state_dir / "files"

    def _host_key(self) -> asyncssh.SSHKey:
        path = self.state_dir / HOST_KEY_FILE
        if path.exists():
            return asyncssh.read_private_key(str(path))
        key = asyncssh.generate_private_key("ssh-ed25519")
        key.write_private_key(str(path))
        path.chmod(0o600)
        return key

    def _password(self) -> str:
        path = self.state_dir / PASSWORD_FILE
        with contextlib.suppress(OSError, UnicodeDecodeError):
            kept = path.read_text(encoding="ascii").strip()
            if len(kept) >= 16:  # one we wrote (token_urlsafe(18) is 24 characters)
                return kept
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(self.password + "\n")
        return self.password

    def _env(self) -> dict[str, str]:
        bin_dir = self.state_dir / "bin"
        system = ":".join(SYSTEM_PATH)
        if has_host_fault(self.faults, FaultKind.NO_VNC):
            system = str(self.state_dir / "path-no-vnc")
        return {
            "PATH": f"{bin_dir}:{system}",
            "TMUX_TMPDIR": str(self.state_dir / "tmux"),
            "PYTHONPATH": f"{FAKE_NVML_DIR}{os.pathsep}{PACKAGE_PARENT}",
            SIM_STATE_ENV_VAR: str(self.sim_dir),
            SIM_ENV_VAR: "1",
            "HOME": str(self.state_dir),
            "USER": DEMO_USER,
            "LANG": "C.UTF-8",
            FAULTS_ENV: format_faults(self.faults),
            # What it starts detached (the simulated Jupyter) watches this process and ends with it,
            # even when it is killed without a chance to clean up.
            HOST_PID_ENV: str(os.getpid()),
        }

    async def start(self) -> DemoHostInfo:
        """Create the state (first time), listen, and return how to connect."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.files_dir.mkdir(exist_ok=True)
        _install_bin(self.state_dir / "bin", self.faults)
        (self.state_dir / "tmux").mkdir(mode=0o700, exist_ok=True)
        if has_host_fault(self.faults, FaultKind.NO_VNC):
            path_without(VNC_PROGRAMS, self.state_dir / "path-no-vnc")
        store = SimStateStore(self.sim_dir, self.gpus or DEFAULT_GPU_SPEC)
        state = store.load()  # creates it for this spec on first use
        if self.gpus is not None and [g.model_key for g in state.gpus] != [m.key for m in parse_gpu_spec(self.gpus)]:
            store.reset(self.gpus)  # the instance came back with another type's GPUs
        if self.gpus is None:  # the GPUs the state kept: refuse a fault they cannot play
            check_faults(self.faults, parse_gpu_spec(",".join(g.model_key for g in state.gpus)))
        key = self._host_key()
        self.password = self._password()
        self._server = await asyncssh.create_server(
            lambda: _DemoServer(self.password, self.client_keys, self.bind),
            self.bind,
            self.port,
            server_host_keys=[key],
            process_factory=self._handle_process,
            sftp_factory=lambda chan: asyncssh.SFTPServer(chan, chroot=str(self.files_dir).encode()),
            encoding=None,
            allow_scp=False,
            keepalive_interval=30,
        )
        port = self._server.sockets[0].getsockname()[1]
        public = key.export_public_key("openssh").decode().split()
        self.info = DemoHostInfo(
            host=self.bind,
            port=port,
            user=DEMO_USER,
            password=self.password,
            host_key_fingerprint=key.get_fingerprint("sha256"),
            known_hosts_line=f"[{self.bind}]:{port} {public[0]} {public[1]}",
            state_dir=str(self.state_dir),
        )
        return self.info

    async def stop(self, *, end_detached: bool = False) -> None:
        """Stop listening, kill every command still running, close connections; `end_detached`:
        also end what its commands left running detached (tmux, the desktop, Jupyter...)."""
        for pgid in list(self._groups):
            _kill_group(pgid)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        # Detached servers (the simulated Jupyter) escaped the process groups: stop them too.
        _stop_simulated_jupyter(self.sim_dir)
        # Let each handler reap its killed command, so no subprocess transport outlives the host.
        if self._handlers:
            await asyncio.wait(set(self._handlers), timeout=5.0)
        if end_detached:
            await asyncio.to_thread(kill_leftovers, self.state_dir)

    async def _handle_process(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)  # type: ignore[arg-type]
            task.add_done_callback(self._handlers.discard)  # type: ignore[arg-type]
        command = process.command
        argv = ["/bin/sh", "-c", command] if command else ["/bin/sh"]
        if process.term_type:
            await self._handle_terminal(process, argv)
            return
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._env(),
                cwd=str(self.state_dir),
                start_new_session=True,  # its own process group, killed as a whole
            )
        except OSError as exc:
            process.stderr.write(f"gpuws demo host: cannot start command: {exc.strerror}\n".encode())
            process.exit(127)
            return
        self._groups.add(proc.pid)
        pumps = [
            asyncio.create_task(self._pump_in(process, proc)),
            asyncio.create_task(_pump_out(proc.stdout, process.stdout)),
            asyncio.create_task(_pump_out(proc.stderr, process.stderr)),
        ]
        finished: asyncio.Future[Any] = asyncio.ensure_future(asyncio.gather(pumps[1], pumps[2], proc.wait()))
        closed: asyncio.Future[Any] = asyncio.ensure_future(process.wait_closed())
        try:
            await asyncio.wait({finished, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if proc.returncode is None:
                _kill_group(proc.pid)  # the client went away (or the server stops): no orphans
                await proc.wait()
            self._groups.discard(proc.pid)
            for task in pumps:
                task.cancel()
            closed.cancel()
            finished.cancel()
            await asyncio.gather(*pumps, finished, closed, return_exceptions=True)
        if not process.is_closing():
            rc = proc.returncode if proc.returncode is not None else 255
            process.exit(rc if rc >= 0 else 128 - rc)

    async def _handle_terminal(self, process: asyncssh.SSHServerProcess[bytes], argv: list[str]) -> None:
        """A session with a pseudo-terminal (the controlling terminal of its own session)."""
        master, slave = pty.openpty()
        _set_size(master, process.term_size)
        env = {**self._env(), "TERM": process.term_type or "xterm"}
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=str(self.state_dir),
                start_new_session=True, preexec_fn=_take_terminal,
            )
        except OSError as exc:
            os.close(master)
            os.close(slave)
            process.stderr.write(f"gpuws demo host: cannot start command: {exc.strerror}\n".encode())
            process.exit(127)
            return
        os.close(slave)
        self._groups.add(proc.pid)
        loop = asyncio.get_running_loop()
        output_done = loop.create_future()

        def readable() -> None:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal closed it
                data = b""
            if not data:
                loop.remove_reader(master)
                if not output_done.done():
                    output_done.set_result(None)
                return
            process.stdout.write(data)

        loop.add_reader(master, readable)

        async def pump_in() -> None:
            while True:
                try:
                    data = await process.stdin.read(65536)
                except asyncssh.TerminalSizeChanged as exc:
                    _set_size(master, (exc.width, exc.height, exc.pixwidth, exc.pixheight))
                    continue
                except (asyncssh.BreakReceived, asyncssh.SignalReceived):
                    continue
                if not data:
                    return
                with contextlib.suppress(OSError):
                    os.write(master, data)

        feeder = asyncio.create_task(pump_in())
        closed: asyncio.Future[Any] = asyncio.ensure_future(process.wait_closed())
        try:
            await asyncio.wait({output_done, closed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_reader(master)
            if proc.returncode is None:
                _kill_group(proc.pid, signal.SIGHUP if not output_done.done() else signal.SIGKILL)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), 2.0)
                if proc.returncode is None:
                    _kill_group(proc.pid)
                    await proc.wait()
            self._groups.discard(proc.pid)
            os.close(master)
            feeder.cancel()
            closed.cancel()
            await asyncio.gather(feeder, closed, return_exceptions=True)
        if not process.is_closing():
            rc = proc.returncode if proc.returncode is not None else 255
            process.exit(rc if rc >= 0 else 128 - rc)

    async def _pump_in(self, process: asyncssh.SSHServerProcess[bytes], proc: asyncio.subprocess.Process) -> None:
        """Client stdin -> command stdin; client signals -> the command's process group."""
        assert proc.stdin is not None
        while True:
            try:
                data = await process.stdin.read(65536)
            except asyncssh.SignalReceived as exc:
                sig = getattr(signal, f"SIG{exc.signal}", signal.SIGTERM)
                _kill_group(proc.pid, sig)
                continue
            except (asyncssh.BreakReceived, asyncssh.TerminalSizeChanged):
                continue
            if not data:
                break
            try:
                proc.stdin.write(data)
                await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.close()


def _set_size(fd: int, size: tuple[int, int, int, int] | None) -> None:
    cols, rows, xpixels, ypixels = size or (80, 24, 0, 0)
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows or 24, cols or 80, xpixels, ypixels))


def _take_terminal() -> None:
    """In the child, after setsid: make its stdin (the pty) the session's controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def leftover_pids(state_dir: Path) -> list[int]:
    """Processes of this user that a demo host with `state_dir` started and that outlived it (tmux's
    server, the desktop's Xvnc...): they carry its GPUWS_SIM_STATE in their environment."""
    marker = f"{SIM_STATE_ENV_VAR}={Path(state_dir) / 'sim'}".encode()
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if entry.stat().st_uid == os.getuid() and marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def kill_leftovers(state_dir: Path) -> int:
    """End what `leftover_pids` finds (tests clean up after themselves with it); how many. SIGTERM
    first, so an X server removes its /tmp/.X*-lock and socket; SIGKILL for what is left after 3 s."""
    import time

    pids = leftover_pids(state_dir)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 3.0
        while sig == signal.SIGTERM and time.monotonic() < deadline and set(pids) & set(leftover_pids(state_dir)):
            time.sleep(0.05)
    return len(pids)


async def _pump_out(source: asyncio.StreamReader | None, sink: Any) -> None:
    assert source is not None
    while data := await source.read(65536):
        sink.write(data)
        await sink.drain()


PARENT_POLL_S = 1.0  # how often a demo host looks whether the process that started it is gone


async def watch_parent(parent: int, gone: asyncio.Event) -> None:
    """Set `gone` once this process's parent (pid `parent`) has ended: it is re-parented then.

    Polled rather than PR_SET_PDEATHSIG: that signal follows the parent *thread*, so a demo host
    started from a short-lived thread (a test bed's hypervisor powering on an instance, any tool's
    worker) was stopped the moment that thread returned, its parent still alive."""
    while os.getppid() == parent:
        await asyncio.sleep(PARENT_POLL_S)
    gone.set()


async def serve_forever(gpus: str | None, port: int, state_dir: Path | None, faults: list[SimFault] | None = None,
                        bind: str = HOST) -> int:
    """Run a demo host until SIGINT/SIGTERM/SIGHUP or its parent's death, printing its connection
    JSON line first; then end every process it started, detached ones too."""
    parent = os.getppid()
    host = DemoHost(gpus=gpus, port=port, state_dir=state_dir, faults=faults, bind=bind)
    info = await host.start()
    print(info.to_json(), flush=True)
    print(f"SIMULATED GPU host (gpuws demo) listening on {info.host}:{info.port} as user "
          f"{info.user!r}; Ctrl-C stops it.", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # SIGHUP: its terminal closed
        loop.add_signal_handler(sig, stop.set)
    watcher = asyncio.create_task(watch_parent(parent, stop))
    try:
        await stop.wait()
    finally:
        watcher.cancel()
        await host.stop(end_detached=True)
    return 0


DEMO_PROFILE_NAME = "demo"

# Illustrative prices so the demo shows costs and price differences; not any provider's list.
DEMO_PRICE_PER_HOUR = 9.80
DEMO_SLICE_PRICES = {
    "full": 2.45,
    "1g.10gb": 0.30,
    "1g.20gb": 0.42,
    "2g.20gb": 0.62,
    "3g.40gb": 0.95,
    "4g.40gb": 1.30,
    "7g.80gb": 2.45,
}


def demo_profile(info: DemoHostInfo) -> HostProfile:
    """The in-memory profile for a running demo host (never saved; its password stays in memory).

    Alert thresholds are short so a viewer sees the idle alert within minutes.
    """
    return HostProfile(
        name=DEMO_PROFILE_NAME,
        host=info.host,
        port=info.port,
        user=info.user,
        auth=AuthMethod.PASSWORD,
        price_per_hour=DEMO_PRICE_PER_HOUR,
        slice_prices=dict(DEMO_SLICE_PRICES),
        alerts=AlertThresholds(idle_minutes=1.0),
        notes="The built-in simulated GPU host (not saved).",
        simulated=True,
    )
