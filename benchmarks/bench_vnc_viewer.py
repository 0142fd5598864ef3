"""The built-in VNC viewer against TigerVNC's own `vncviewer`: `python -m benchmarks bench_vnc_viewer`.

One real TigerVNC `Xvnc` desktop at 1920x1080 on loopback (started here with a password file, as the
desktop agent starts it; no SSH tunnel, so the figures are the viewers' own), an animation running
in it (`glxgears`, software GL), each viewer connected for the same time in turn:

- frames: the FramebufferUpdates Xvnc sent that connection (its own count, printed in its log when the
  connection closes), per second; for the built-in viewer also the paints it made;
- CPU per frame: the viewer process's CPU time over the run / frames (vncviewer runs on an Xvfb
  screen of the same size; the built-in viewer offscreen in this process, its decode thread included);
- key-press-to-pixel: a key sent to an xterm on the desktop until the echoed character's pixels
  arrive in the built-in viewer's framebuffer (p50/p95 of 30);
- memory: the built-in viewer's RSS sampled each second over the run (a short run, not 10 minutes).
The load average is printed: on a shared 2-core machine it moves every figure.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

RUN_S = float(os.environ.get("GPUWS_BENCH_VNC_S", "20"))
KEYS = 30
DISPLAY_NUMBER = 77
PORT = 5977
PASSWORD = "benchpw1"


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _updates(log: Path, before: int) -> int:
    """The FramebufferUpdates of the connection that closed after the log's first `before` bytes."""
    found = re.findall(r"Framebuffer updates: (\d+)", log.read_text(errors="replace")[before:])
    return max((int(n) for n in found), default=0)


def main() -> int:
    tools = ("Xvnc", "vncpasswd", "vncviewer", "glxgears", "xterm", "Xvfb", "xdotool")
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        print(f"skipped: missing {missing} (scripts/install-deps.sh test)")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="gpuws-vnc-bench-"))
    passwd = tmp / "passwd"
    passwd.write_bytes(subprocess.run(["vncpasswd", "-f"], input=PASSWORD.encode() + b"\n", capture_output=True,
                                      check=True).stdout)
    passwd.chmod(0o600)
    log = tmp / "xvnc.log"
    xvnc = subprocess.Popen(["Xvnc", f":{DISPLAY_NUMBER}", "-geometry", "1920x1080", "-depth", "24", "-rfbauth",
                             str(passwd), "-SecurityTypes", "VncAuth", "-localhost", "-interface", "127.0.0.1",
                             "-rfbport", str(PORT), "-UseIPv6=0", "-AcceptSetDesktopSize=0"],
                            stdout=subprocess.DEVNULL, stderr=log.open("w"))
    env = {**os.environ, "DISPLAY": f":{DISPLAY_NUMBER}"}
    time.sleep(2)
    gears = subprocess.Popen(["glxgears", "-geometry", "800x800+560+140"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    typed = tmp / "typed.txt"
    xterm = subprocess.Popen(["xterm", "-geometry", "40x5+0+0", "-e", "sh", "-c", f"cat > {typed}"], env=env)
    try:
        # No window manager on this desktop: give the xterm the keyboard focus (the key test types into it).
        subprocess.run(["xdotool", "search", "--sync", "--onlyvisible", "--class", "xterm", "windowfocus"],
                       env=env, timeout=60, capture_output=True)
        print(f"load average at start: {os.getloadavg()}")
        ours = _builtin(log)
        theirs = _vncviewer(log, tmp)
        print(f"\nbuilt-in: {ours['fps']:.1f} frames/s ({ours['paints_fps']:.1f} paints/s), "
              f"{ours['cpu_ms']:.1f} ms CPU/frame")
        print(f"vncviewer: {theirs['fps']:.1f} frames/s, {theirs['cpu_ms']:.1f} ms CPU/frame")
        if theirs["fps"] > 0 and theirs["cpu_ms"] > 0:
            print(f"ratio built-in / vncviewer: frames {ours['fps'] / theirs['fps']:.2f}x (target >= 0.8x), "
                  f"CPU per frame {ours['cpu_ms'] / theirs['cpu_ms']:.2f}x (target <= 1.5x)")
        print(f"key-press-to-pixel: p50 {ours['key_p50']:.0f} ms, p95 {ours['key_p95']:.0f} ms (target p95 < 100 ms)")
        print(f"built-in RSS over {RUN_S:.0f} s: start {ours['rss0']:.0f} MiB, end {ours['rss1']:.0f} MiB, "
              f"max {ours['rssmax']:.0f} MiB")
        print(f"load average at end: {os.getloadavg()}")
    finally:
        for proc in (gears, xterm, xvnc):
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _builtin(log: Path) -> dict[str, float]:
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from gpuws.app.viewer import ViewerState
    from gpuws.ui.vnc.window import VncWindow

    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication([])
    window = VncWindow("bench", PORT, PASSWORD)
    window.view.follow_window = False  # keep the desktop at 1920x1080
    window.resize(1920, 1150)
    before = log.stat().st_size
    window.start()
    deadline = time.monotonic() + 60
    while window.view.session.state is not ViewerState.CONNECTED and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.01)
    rss = [_rss_mib()]
    # The run is Qt's own event loop (as in the app), not a polling loop that would cost CPU of its own.
    sampler = QTimer(interval=1000)
    sampler.timeout.connect(lambda: rss.append(_rss_mib()))
    sampler.start()
    QTimer.singleShot(int(RUN_S * 1000), app.quit)
    cpu0, t0, paints0 = time.process_time(), time.monotonic(), window.view.frames_shown
    app.exec()
    cpu, elapsed, paints = time.process_time() - cpu0, time.monotonic() - t0, window.view.frames_shown - paints0
    sampler.stop()
    delays = _key_to_pixel(app, window)
    window.close()
    app.processEvents()
    time.sleep(1)
    updates = _updates(log, before)
    return {"fps": updates / elapsed, "paints_fps": paints / elapsed, "cpu_ms": 1000 * cpu / max(1, updates),
            "key_p50": statistics.median(delays), "key_p95": statistics.quantiles(delays, n=20)[18],
            "rss0": rss[0], "rss1": rss[-1], "rssmax": max(rss)}


def _key_to_pixel(app: object, window: object) -> list[float]:
    """Type a character into the xterm (top-left) and wait for its cell's pixels to change."""
    from gpuws.ui.vnc.view import VncView

    view: VncView = window.view  # type: ignore[attr-defined]
    fb = view.session.framebuffer
    assert fb is not None
    delays = []
    view.session.pointer(0, 40, 30)  # no window manager here: the keyboard follows the pointer onto the xterm
    time.sleep(0.5)
    for i in range(KEYS):
        with fb.lock:
            before = fb.pixels[0:120, 0:300].copy()
        changed = threading.Event()
        keysym = ord("a") + i % 26
        start = time.perf_counter()
        view.session.key(keysym, True)
        view.session.key(keysym, False)
        while not changed.is_set() and time.perf_counter() - start < 5:
            with fb.lock:
                if (fb.pixels[0:120, 0:300] != before).any():
                    changed.set()
            time.sleep(0.001)
        delays.append(1000 * (time.perf_counter() - start))
        if i % 10 == 9:  # Return: a new line, so the cells keep changing
            view.session.key(0xFF0D, True)
            view.session.key(0xFF0D, False)
            time.sleep(0.2)
    return delays


def _vncviewer(log: Path, tmp: Path) -> dict[str, float]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.support.xvfb import xvfb

    with xvfb(1920, 1080) as display:
        before = log.stat().st_size
        viewer = subprocess.Popen(["vncviewer", "-passwd", str(tmp / "passwd"), "-FullScreen", "-AutoSelect=1",
                                   "-RemoteResize=0", f"127.0.0.1::{PORT}"],
                                  env={**os.environ, "DISPLAY": display}, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        time.sleep(3)  # connected and through the first full frame
        cpu0, t0 = _cpu_s(viewer.pid), time.monotonic()
        time.sleep(RUN_S)
        cpu, elapsed = _cpu_s(viewer.pid) - cpu0, time.monotonic() - t0
        total = _cpu_s(viewer.pid)
        viewer.terminate()
        viewer.wait(10)
        time.sleep(1)
        updates = _updates(log, before)
    # Xvnc counts the whole connection (3 s more than the measured window): scale to the window.
    per_s = updates / (elapsed + 3)
    return {"fps": per_s, "cpu_ms": 1000 * cpu / max(1, per_s * elapsed), "cpu_total": total}


if __name__ == "__main__":
    raise SystemExit(main())
