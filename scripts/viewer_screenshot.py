"""Render docs/screenshots/viewer.png: the built-in viewer on the demo host's real desktop.

Run in a keyring session: dbus-run-session -- sh -c 'eval "$(printf x | gnome-keyring-daemon --unlock --components=secrets)"; PYTHONPATH=. .venv/bin/python scripts/viewer_screenshot.py "$(mktemp -d)"'
"""
import json, os, signal, subprocess, sys, time
from pathlib import Path
os.environ["QT_QPA_PLATFORM"] = "offscreen"
home = Path(sys.argv[1]); os.environ["GPUWS_CONFIG_DIR"] = str(home / "config"); os.environ["HOME"] = str(home)
(home / ".ssh").mkdir(parents=True, exist_ok=True)
from PySide6.QtWidgets import QApplication
from PySide6.QtCore import QTimer
from gpuws.core.paths import data_dir
from gpuws.core.secrets import SecretStore
from gpuws.core.models import SecretKind
proc = subprocess.Popen([sys.executable, "-m", "gpuws", "desktop", "demo", "--viewer", "none", "--json", "--geometry", "1280x720"], stdout=subprocess.PIPE, text=True)
first = json.loads(proc.stdout.readline())
password = SecretStore().get("demo", SecretKind.VNC_PASSWORD)
import asyncio
from gpuws.app import desktop as app_desktop
from gpuws.app.targets import open_target
async def get_check():
    async with open_target("demo") as conn:
        return await app_desktop.check(conn)
found = asyncio.run(get_check())
state = data_dir() / "demo-host"
env = {**os.environ, "DISPLAY": f":{first['display']}", "XAUTHORITY": str(state / ".gpuws" / "desktop" / "Xauthority")}
sim = subprocess.run([sys.executable, "-c", "import shutil; print(shutil.which('nvidia-smi') or '')"], capture_output=True, text=True)
subprocess.run(["xsetroot", "-solid", "#2b3a4a"], env=env)
xterm = subprocess.Popen(["xterm", "-geometry", "100x30+20+20", "-fa", "Monospace", "-fs", "9", "-e", "sh", "-c",
    f"{sys.executable} -m gpuws shell demo -- nvidia-smi; exec sh"], env=env)
gears = subprocess.Popen(["glxgears", "-geometry", "420x360+780+60"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
from gpuws.ui.vnc.window import VncWindow
app = QApplication([])
w = VncWindow("demo", first["local_port"], password, simulated=True, found=found, display=first["display"])
w.resize(1280, 800)
w.start()
def done():
    w.grab().save("docs/screenshots/viewer.png")
    print(w.view.session.state, w.state_label.text())
    w.close(); app.quit()
QTimer.singleShot(15000, done)
app.exec()
xterm.kill(); gears.kill()
proc.send_signal(signal.SIGINT); proc.wait(30)
subprocess.run([sys.executable, "-m", "gpuws", "desktop", "demo", "--stop"])
