"""gpuws desktop agent: detects, starts, reuses and stops the user's VNC desktop on a host.

Sent over SSH and run by the host's python3 as `python3 -c <this file> ACTION [options]`; nothing is
installed on the host except the session's state under ~/.gpuws/desktop (0700). Standalone on
purpose: stdlib only, no gpuws imports (an import-linter contract checks this). Prints one JSON
object on stdout; gpuws (gpuws.core.desktop) interprets it.

Actions:
  check [--display N]            what the host can serve: VNC servers, VirtualGL, websockify and noVNC,
                                 DCV, Selkies, desktop sessions, tmux, the OS, the GPUs (raw
                                 `nvidia-smi --query-gpu` text) and `glxinfo -B` of the desktop (raw)
  start [--display N] [--geometry WxH] [--depth D]
                                 the VNC password is read from stdin (one line), never from argv; the
                                 running gpuws desktop of this user is reused (and its password file
                                 rewritten), else Xvnc starts on 127.0.0.1 only with the desktop session
                                 (under vglrun where VirtualGL is installed)
  web                            websockify + noVNC on the host's 127.0.0.1 in front of the running desktop
  stop                           ends the desktop (Xvnc and its session) of this user

Written for any python3 >= 3.6, hence no annotations.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

STATE_DIR = os.path.join(os.path.expanduser("~"), ".gpuws", "desktop")
STATE_FILE = os.path.join(STATE_DIR, "state.json")
PASSWD_FILE = os.path.join(STATE_DIR, "passwd")
LOG_FILE = os.path.join(STATE_DIR, "xvnc.log")
# The X display's own key (MIT-MAGIC-COOKIE-1): without it, other users of the host could open the
# desktop's X display through its local socket.
XAUTH_FILE = os.path.join(STATE_DIR, "Xauthority")
VNC_BASE = 5900
TURBOVNC = "/opt/TurboVNC/bin"
# The first installed wins: full desktops before window managers, a bare xterm last.
SESSIONS = (
    ("xfce4", ("startxfce4", "xfce4-session")),
    ("mate", ("mate-session",)),
    ("gnome", ("gnome-session",)),
    ("kde", ("startplasma-x11", "startkde")),
    ("openbox", ("openbox-session", "openbox")),
    ("fluxbox", ("startfluxbox", "fluxbox")),
    ("icewm", ("icewm-session", "icewm")),
    ("xterm", ("xterm",)),
)
NOVNC_DIRS = ("/usr/share/novnc", "/usr/share/webapps/novnc", "/opt/noVNC", "/opt/novnc",
              os.path.join(os.path.expanduser("~"), "noVNC"))
MAX_TEXT = 16384  # of any tool's output passed back
# A detached program gets a parent that waits for it, so when it ends it is reaped at once even
# where nothing reaps orphans (containers whose PID 1 is not an init). The program runs in a
# session of its own; its pid is the first line on stdout.
SUPERVISE = (
    "import subprocess, sys\n"
    "child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=sys.stderr, start_new_session=True)\n"
    "print(child.pid, flush=True)\n"
    "sys.stdout.close()\n"
    "sys.exit(child.wait())\n"
)


class Detached:
    """A program started under SUPERVISE: `pid` is the program's, `poll()` says whether it ended."""

    def __init__(self, argv, log, env=None):
        self.supervisor = subprocess.Popen([sys.executable, "-c", SUPERVISE, *argv], stdin=subprocess.DEVNULL,
                                           stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True,
                                           cwd=os.path.expanduser("~"))
        out = self.supervisor.stdout
        assert out is not None
        line = out.readline()
        out.close()
        self.pid = int(line) if line.strip().isdigit() else None

    def poll(self):
        return self.supervisor.poll() if self.pid is not None else 127

    def kill(self):
        if self.pid is not None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)


def which(name):
    return shutil.which(name)


def xvnc_path():
    """TurboVNC first (made for VirtualGL), then TigerVNC's (or any) Xvnc on PATH."""
    turbo = os.path.join(TURBOVNC, "Xvnc")
    if os.access(turbo, os.X_OK):
        return turbo
    return which("Xvnc")


def vncpasswd_path(xvnc):
    if xvnc:
        beside = os.path.join(os.path.dirname(xvnc), "vncpasswd")
        if os.access(beside, os.X_OK):
            return beside
    return which("vncpasswd")


def session_command():
    for name, commands in SESSIONS:
        for command in commands:
            path = which(command)
            if path:
                return name, path
    return None, None


def os_release():
    info = {}
    try:
        with open("/etc/os-release", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.strip().partition("=")
                if sep:
                    info[key] = value.strip().strip('"')
    except OSError:
        pass
    return info.get("ID", ""), info.get("ID_LIKE", "")


def run_text(argv, env=None, timeout=20):
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              env=env, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    return done.returncode, done.stdout.decode("utf-8", "replace")[:MAX_TEXT]


def read_state():
    try:
        with open(STATE_FILE, encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def is_xvnc(pid):
    """True when `pid` is a live Xvnc of this user (never a process that reused the number)."""
    try:
        with open(f"/proc/{int(pid)}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0")[0].decode("utf-8", "replace")
        st = os.stat(f"/proc/{int(pid)}")
    except (OSError, ValueError, TypeError):
        return False
    return os.path.basename(argv0) == "Xvnc" and st.st_uid == os.getuid()


def running_state():
    state = read_state()
    if state and is_xvnc(state.get("pid")):
        return state
    return None


def x_socket(n):
    return f"/tmp/.X11-unix/X{n}"  # noqa: S108 (X11's fixed path, not a temporary file)


def display_free(n):
    if os.path.exists(x_socket(n)) or os.path.exists(f"/tmp/.X{n}-lock"):  # noqa: S108 (X11's fixed path)
        return False
    return port_free(VNC_BASE + n)


def port_free(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        return False
    finally:
        s.close()
    return True


def free_display(start=1):
    for n in range(start, 100):
        if display_free(n):
            return n
    return None


def wait_x(n, proc, timeout=15.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        if os.path.exists(x_socket(n)):
            return True
        time.sleep(0.1)
    return False


def wait_rfb(port, proc, timeout=15.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                if s.recv(12).startswith(b"RFB "):
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def log_tail():
    try:
        with open(LOG_FILE, "rb") as f:
            return f.read()[-2000:].decode("utf-8", "replace")
    except OSError:
        return ""


def vgl_prefix():
    vglrun = which("vglrun")
    if not vglrun:
        return []
    # A headless host has no 3D X server on :0: VirtualGL 3's EGL back end uses the GPU directly.
    if not os.environ.get("VGL_DISPLAY") and not os.path.exists(x_socket(0)):
        return [vglrun, "-d", "egl"]
    return [vglrun]


def make_xauthority(path, display):
    """A new 0600 Xauthority file with a random cookie for `display` (fed to xauth on stdin, never in
    argv); None where xauth is missing (the X server then runs without one)."""
    xauth = which("xauth")
    if not xauth:
        return None
    os.makedirs(STATE_DIR, mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.close(fd)
    cookie = os.urandom(16).hex()
    done = subprocess.run([xauth, "-q", "-f", path, "source", "-"], input=f"add :{display} . {cookie}\n".encode(),
                          capture_output=True)
    return path if done.returncode == 0 else None


def glxinfo_on(display, xauthority=None):
    glxinfo = which("glxinfo")
    if not glxinfo:
        return None
    env = dict(os.environ, DISPLAY=f":{display}")
    if xauthority:
        env["XAUTHORITY"] = xauthority
    _rc, text = run_text([*vgl_prefix(), glxinfo, "-B"], env=env)
    return text


def renderer_probe(display_hint):
    """`glxinfo -B` on the running desktop, else on a throw-away Xvnc with no network listener."""
    state = running_state()
    if state:
        return glxinfo_on(int(state["display"]), state.get("xauthority"))
    xvnc = xvnc_path()
    if not xvnc or not which("glxinfo"):
        return None
    n = display_hint if display_hint is not None and display_free(display_hint) else free_display(50)
    if n is None:
        return None
    # -rfbport -1: no TCP listener at all, so no password is needed for this probe.
    auth = make_xauthority(os.path.join(STATE_DIR, "probe-Xauthority"), n)
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen([xvnc, f":{n}", "-rfbport", "-1", "-SecurityTypes", "None", "-nolisten", "tcp",
                                 "-geometry", "320x240", *(["-auth", auth] if auth else [])],
                                stdin=subprocess.DEVNULL, stdout=devnull, stderr=devnull, start_new_session=True)
    try:
        if not wait_x(n, proc):
            return None
        return glxinfo_on(n, auth)
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def check(display_hint):
    xvnc = xvnc_path()
    x11vnc = which("x11vnc")
    session, session_path = session_command()
    novnc = next((d for d in NOVNC_DIRS if os.path.isfile(os.path.join(d, "vnc.html"))), None)
    os_id, os_like = os_release()
    smi = which("nvidia-smi")
    gpus = None
    if smi:
        _rc, gpus = run_text([smi, "--query-gpu=index,name", "--format=csv,noheader"])
    state = running_state()
    return {
        "xvnc": xvnc,
        "turbovnc": bool(xvnc and xvnc.startswith(TURBOVNC)),
        "vncserver": which("vncserver") or which("tigervncserver"),
        "x11vnc": x11vnc,
        "vncpasswd": vncpasswd_path(xvnc),
        "vglrun": which("vglrun"),
        "websockify": which("websockify"),
        "novnc": novnc,
        "dcv": which("dcv") or (which("dcvserver") if which("dcvserver") else None),
        "selkies": which("selkies-gstreamer") or which("selkies"),
        "session": session,
        "session_path": session_path,
        "glxinfo": which("glxinfo"),
        "tmux": which("tmux"),
        "os_id": os_id,
        "os_like": os_like,
        "gpus": gpus,
        "glxinfo_b": renderer_probe(display_hint),
        "running": state,
    }


def write_password(tool, password):
    """vncpasswd -f: the password in on stdin, the obfuscated file out on stdout; never in argv."""
    done = subprocess.run([tool, "-f"], input=(password + "\n").encode(), capture_output=True)
    if done.returncode != 0 or not done.stdout:
        return f"vncpasswd -f failed (exit {done.returncode})"
    fd = os.open(PASSWD_FILE + ".new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(done.stdout)
    os.replace(PASSWD_FILE + ".new", PASSWD_FILE)
    return None


def start(display, geometry, depth):
    password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        return {"error": "no VNC password on stdin"}
    os.makedirs(STATE_DIR, mode=0o700, exist_ok=True)
    os.chmod(STATE_DIR, 0o700)
    xvnc = xvnc_path()
    if not xvnc:
        return {"error": "no VNC server (Xvnc) on this host", "missing": "vnc_server"}
    tool = vncpasswd_path(xvnc)
    if not tool:
        return {"error": "no vncpasswd on this host", "missing": "vncpasswd"}
    problem = write_password(tool, password)
    if problem:
        return {"error": problem}
    state = running_state()
    if state:  # never a second desktop for the same user
        state["reused"] = True
        return state
    if display is None:
        display = free_display(1)
        if display is None:
            return {"error": "no free X display from :1 to :99"}
    elif not display_free(display):
        return {"error": f"display :{display} (port {VNC_BASE + display}) is taken on the host"}
    port = VNC_BASE + display
    argv = [xvnc, f":{display}", "-geometry", geometry, "-depth", str(depth), "-rfbauth", PASSWD_FILE,
            "-SecurityTypes", "VncAuth", "-localhost", "-interface", "127.0.0.1", "-rfbport", str(port),
            "-nolisten", "tcp", "-desktop", "gpuws", "-AlwaysShared"]
    xauthority = make_xauthority(XAUTH_FILE, display)
    if xauthority:
        argv += ["-auth", xauthority]
    if not xvnc.startswith(TURBOVNC):
        argv.append("-UseIPv6=0")  # TigerVNC: 127.0.0.1 only, not ::1 as well (TurboVNC has no IPv6 by default)
    with open(LOG_FILE, "ab") as log:
        proc = Detached(argv, log)
    if not (wait_x(display, proc) and wait_rfb(port, proc)):
        if proc.poll() is None:
            proc.kill()
        return {"error": "Xvnc did not start: " + log_tail().strip()[-600:]}
    session, session_path = session_command()
    session_pid = None
    if session_path:
        env = dict(os.environ, DISPLAY=f":{display}")
        env.pop("WAYLAND_DISPLAY", None)
        if xauthority:
            env["XAUTHORITY"] = xauthority
        with open(os.path.join(STATE_DIR, "session.log"), "ab") as log:
            session_pid = Detached([*vgl_prefix(), session_path], log, env).pid
    state = {"pid": proc.pid, "display": display, "port": port, "geometry": geometry, "session": session,
             "xauthority": xauthority,
             "session_pid": session_pid, "virtualgl": bool(vgl_prefix()), "started": time.time()}
    fd = os.open(STATE_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(state, f)
    state["reused"] = False
    return state


def web():
    """websockify + noVNC on 127.0.0.1 of the host, in front of the running desktop (reused)."""
    state = running_state()
    if not state:
        return {"error": "no desktop is running; start it first"}
    websockify = which("websockify")
    novnc = next((d for d in NOVNC_DIRS if os.path.isfile(os.path.join(d, "vnc.html"))), None)
    if not websockify or not novnc:
        return {"error": "websockify and noVNC are needed on the host for the browser viewer",
                "missing": "novnc" if websockify else "websockify"}
    web_pid, web_port = state.get("web_pid"), state.get("web_port")
    if web_pid and web_port and pid_alive(web_pid) and not port_free(int(web_port)):
        return {"web_port": web_port, "reused": True}
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with open(os.path.join(STATE_DIR, "websockify.log"), "ab") as log:
        proc = Detached([websockify, "--web", novnc, f"127.0.0.1:{port}", f"127.0.0.1:{state['port']}"], log)
    deadline = time.time() + 15
    while port_free(port) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.1)
    if port_free(port):
        return {"error": "websockify did not start"}
    state["web_pid"], state["web_port"] = proc.pid, port
    fd = os.open(STATE_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(state, f)
    return {"web_port": port, "reused": False}


def pid_alive(pid):
    try:
        return os.stat(f"/proc/{int(pid)}").st_uid == os.getuid()
    except (OSError, ValueError, TypeError):
        return False


def kill_group(pgid, sig):
    with contextlib.suppress(OSError, TypeError):
        os.killpg(pgid, sig)


def stop():
    state = read_state()
    stopped = False
    if state:
        session_pid = state.get("session_pid")
        if session_pid:
            kill_group(int(session_pid), signal.SIGTERM)
        if state.get("web_pid") and pid_alive(state["web_pid"]):
            kill_group(int(state["web_pid"]), signal.SIGTERM)
        pid = state.get("pid")
        if is_xvnc(pid):
            os.kill(int(pid), signal.SIGTERM)
            deadline = time.time() + 5
            while is_xvnc(pid) and time.time() < deadline:
                time.sleep(0.1)
            if is_xvnc(pid):
                os.kill(int(pid), signal.SIGKILL)
            stopped = True
        if session_pid:
            kill_group(int(session_pid), signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.unlink(STATE_FILE)
    return {"stopped": stopped}


def option(args, name, default=None):
    if name in args:
        i = args.index(name)
        if i + 1 < len(args):
            return args[i + 1]
    return default


def main(argv):
    if not argv or argv[0] not in ("check", "start", "stop", "web"):
        print(json.dumps({"error": "usage: check | start | stop | web"}))
        return 2
    action, rest = argv[0], argv[1:]
    display = option(rest, "--display")
    display = int(display) if display not in (None, "", "auto") else None
    if action == "check":
        result = check(display)
    elif action == "start":
        result = start(display, option(rest, "--geometry", "1920x1080"), int(option(rest, "--depth", "24")))
    elif action == "web":
        result = web()
    else:
        result = stop()
    print(json.dumps(result))
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
