"""A real OpenSSH `sshd` on a loopback port, started and stopped by tests.

Runs as the current user (root in CI) with its own host key, authorized_keys and environment
(`SetEnv`), so the simulated `nvidia-smi` can be put first on the host's PATH. It can be killed
and restarted on the same port with the same key (reconnect tests), or restarted with a new host
key (changed-key tests).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
REPO_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def keygen(path: Path, kind: str = "ed25519") -> Path:
    """Create an unencrypted key pair at `path` (and `path`.pub)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "gpuws-test", "-f", str(path)], check=True
    )
    return path


def install_sim_nvidia_smi(bin_dir: Path, python: str = sys.executable) -> Path:
    """Put the simulated `nvidia-smi` in `bin_dir` (the host's own python3 sees no NVML: fallback path)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO_ROOT}" exec "{python}" -m gpuws.sim.nvidia_smi "$@"\n')
    smi.chmod(0o755)
    for tool in ("kill", "ps"):  # so simulated GPU processes can be listed and stopped
        wrapper = bin_dir / tool
        wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO_ROOT}" exec "{python}" -m gpuws.sim.procs {tool} "$@"\n')
        wrapper.chmod(0o755)
    for tool in ("journalctl", "dmesg"):  # the simulated host's kernel log, never this machine's
        wrapper = bin_dir / tool
        wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO_ROOT}" exec "{python}" -m gpuws.sim.health {tool} "$@"\n')
        wrapper.chmod(0o755)
    return smi


@dataclass
class SshdServer:
    """One sshd process serving on 127.0.0.1:`port` from `workdir`."""

    workdir: Path
    env: Mapping[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    user: str = field(default_factory=getpass.getuser)
    process: subprocess.Popen[bytes] | None = None
    # Further host key types the server offers besides ed25519 (e.g. "ecdsa", "rsa").
    extra_host_key_kinds: tuple[str, ...] = ()
    # Extra sshd_config lines (e.g. "KbdInteractiveAuthentication yes"); they win over the defaults.
    extra_config: tuple[str, ...] = ()
    # A login with no shell start-up files: HOME is an empty directory, so the user's shell reads
    # no ~/.bashrc (Debian's bash reads it for ssh commands too; here it runs `pyenv init`, which
    # would dominate every exec). Benchmarks use it to measure what a plain host would do.
    clean_login: bool = False

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host_key = keygen(self.workdir / "ssh_host_ed25519_key")
        self.extra_host_keys = {kind: keygen(self.workdir / f"ssh_host_{kind}_key", kind)
                                for kind in self.extra_host_key_kinds}
        self.host_certificates: list[Path] = []
        self.client_key = keygen(self.workdir / "client_ed25519")
        self.authorized_keys = self.workdir / "authorized_keys"
        self.authorized_keys.write_text(Path(f"{self.client_key}.pub").read_text())
        self.authorized_keys.chmod(0o600)
        self.log_path = self.workdir / "sshd.log"

    @property
    def host_public_key(self) -> str:
        return Path(f"{self.host_key}.pub").read_text().strip()

    def known_hosts_line(self, key_kind: str = "ed25519") -> str:
        """A known_hosts line for this server's `key_kind` host key, as OpenSSH writes it for a non-22 port."""
        key = self.host_key if key_kind == "ed25519" else self.extra_host_keys[key_kind]
        kind, blob = Path(f"{key}.pub").read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {kind} {blob}\n"

    def certify_host_key(self, ca_key: Path, principals: str = "127.0.0.1", validity: str = "-5m:+1h",
                         key_kind: str = "ed25519") -> Path:
        """Sign a host key with `ca_key` (ssh-keygen -s -h) and serve the certificate (takes effect at start)."""
        key = self.host_key if key_kind == "ed25519" else self.extra_host_keys[key_kind]
        cert = Path(f"{key}-cert.pub")
        cert.unlink(missing_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-s", str(ca_key), "-h", "-I", "gpuws-test-host",
                        "-n", principals, "-V", validity, f"{key}.pub"], check=True)
        if cert not in self.host_certificates:
            self.host_certificates.append(cert)
        return cert

    def _write_config(self) -> Path:
        env = dict(self.env)
        if self.clean_login:
            home = self.workdir / "home"
            home.mkdir(exist_ok=True)
            env.setdefault("HOME", str(home))
        lines = [
            *self.extra_config,  # first: sshd keeps the first value of each keyword
            f"Port {self.port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {self.host_key}",
            *(f"HostKey {key}" for key in self.extra_host_keys.values()),
            *(f"HostCertificate {cert}" for cert in self.host_certificates),
            f"PidFile {self.workdir / 'sshd.pid'}",
            f"AuthorizedKeysFile {self.authorized_keys}",
            "PermitRootLogin prohibit-password",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "UsePAM no",
            "StrictModes no",
            "PrintMotd no",
            "AllowTcpForwarding yes",
            "MaxSessions 64",
            "MaxStartups 100:30:200",
            "LogLevel VERBOSE",
            "Subsystem sftp internal-sftp",
        ]
        if env:
            lines.append("SetEnv " + " ".join(f'{k}="{v}"' for k, v in env.items()))
        config = self.workdir / "sshd_config"
        config.write_text("\n".join(lines) + "\n")
        return config

    def start(self, timeout: float = 10.0) -> None:
        """Start sshd and wait until it accepts TCP connections."""
        Path("/run/sshd").mkdir(parents=True, exist_ok=True) if os.geteuid() == 0 else None
        config = self._write_config()
        with self.log_path.open("ab") as log:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(config)], stdout=log, stderr=log, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"sshd exited: {self.log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not start listening in time")

    def stop(self) -> None:
        """Kill sshd and every session it started (like a host going away)."""
        # Each connection's sshd child leads its own session, so killing the listener's group
        # alone would leave live connections up.
        self.kill_sessions()
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, 9)
            self.process.wait(5)
        # Sessions run in their own process groups; kill what is left of them too.
        subprocess.run(["pkill", "-9", "-f", f"sshd: .*{self.port}"], check=False)
        self.process = None

    def kill_sessions(self) -> None:
        """Kill the per-connection sshd children but keep the listener (a dropped link)."""
        if self.process is None:
            return
        subprocess.run(["pkill", "-9", "-P", str(self.process.pid)], check=False)

    def restart(self, new_host_key: bool = False) -> None:
        self.stop()
        if new_host_key:
            keygen(self.host_key)
        self.start()
