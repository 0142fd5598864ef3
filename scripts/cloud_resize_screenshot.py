"""Screenshot of the Resize tab offering a cloud host's instance types (docs/screenshots/cloud-resize.png).

The host is the SIMULATED guest of an AWS g6f.2xlarge (1/4 of an NVIDIA L4, `gpuws demo-host --gpus
l4/4`'s GPU) in us-east-2, read through the simulated nvidia-smi on this machine; the tab lists
its family from the instance-type catalog and the user has chosen g6f.4xlarge (1/2), so the price
change shows above the typed confirmation. Nothing is applied.

    QT_QPA_PLATFORM=offscreen python scripts/cloud_resize_screenshot.py docs/screenshots
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class _LocalConnection:
    """A HostSession connection whose runner runs the simulated host's tools here."""

    def __init__(self, runner: object) -> None:
        self.runner = runner

    async def connect(self) -> None:
        return None

    async def close(self) -> None:
        return None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", default="1100x760", help="WIDTHxHEIGHT")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))

    from PySide6.QtWidgets import QApplication

    from gpuws.core.models import HostProfile, ProviderInfo
    from gpuws.core.runner import LocalRunner
    from gpuws.sim.state import SimStateStore
    from gpuws.ui.app import wait_until
    from gpuws.ui.bridge import AsyncBridge
    from gpuws.ui.session_controller import HostSession
    from gpuws.ui.tabs import HostContext
    from gpuws.ui.tabs.resize import ResizeTab

    work = Path(tempfile.mkdtemp(prefix="gpuws-cloud-shot-"))
    bin_dir = work / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m gpuws.sim.nvidia_smi "$@"\n')
    smi.chmod(0o755)
    store = SimStateStore(work / "state", "l4/4")
    store.load()
    runner = LocalRunner(dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", GPUWS_SIM_STATE=str(store.dir)))

    app = QApplication(sys.argv[:1])
    bridge = AsyncBridge()
    bridge.start()
    profile = HostProfile(name="l4-dev", host="127.0.0.1", user="ubuntu", simulated=True, currency="USD",
                          slice_profile="g6f.2xlarge",
                          provider=ProviderInfo(kind="aws", instance_id="i-0abc123", region="us-east-2"))
    session = HostSession(profile, bridge, connection_factory=lambda _p, **_kw: _LocalConnection(runner))
    tab = ResizeTab()
    tab.resize(width, height)
    try:
        session.connect_host()
        if not wait_until(app, lambda: session.state == "connected", 20):
            print("the simulated host did not connect", file=sys.stderr)
            return 1
        tab.set_host(HostContext(profile, session, bridge))
        tab.show()
        if not wait_until(app, lambda: bool(tab.gpus), 20):
            print("the GPUs were not read", file=sys.stderr)
            return 1
        if not tab.picker.select_instance_type("g6f.4xlarge"):
            print("g6f.4xlarge is not offered", file=sys.stderr)
            return 1
        wait_until(app, lambda: False, 1.0)
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "cloud-resize.png"
        if not tab.grab().save(str(path)):
            return 1
        print(path)
    finally:
        tab.set_host(None)
        tab.close()
        session.close()
        bridge.shutdown()
        app.processEvents()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
