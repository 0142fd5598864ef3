"""Nothing the Windows app loads needs a POSIX-only module (issue 27).

Every module of the client (all of gpuws but the on-host scripts in gpuws.agent and the
simulated host in gpuws.sim, which Windows never runs) is imported in a fresh interpreter where
gpuws code cannot import fcntl, pwd, grp, termios, resource, or tty and pty (which need termios).
Only imports made by gpuws are refused: the libraries it uses (asyncssh, filelock) pick their
Windows branch by `sys.platform` on Windows, and their POSIX branch here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r'''
import builtins, importlib, json, pkgutil, sys

POSIX_ONLY = {"fcntl", "pwd", "grp", "termios", "resource", "tty", "pty"}
SKIP = ("gpuws.agent", "gpuws.sim", "gpuws.__main__")  # __main__ would run the command line
_import = builtins.__import__


def _guarded(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__") or ""
    if level == 0 and name.partition(".")[0] in POSIX_ONLY and importer.partition(".")[0] == "gpuws":
        raise ModuleNotFoundError(f"No module named {name!r} (POSIX-only, imported by {importer})", name=name)
    return _import(name, globals, locals, fromlist, level)


builtins.__import__ = _guarded

# The guard itself: a gpuws module that imports fcntl is refused.
try:
    exec("import fcntl", {"__name__": "gpuws._posix_probe"})
    guard_works = False
except ModuleNotFoundError:
    guard_works = True

import gpuws


def walk(path, prefix):
    for info in pkgutil.iter_modules(path, prefix):
        if info.name in SKIP or info.name.startswith(tuple(s + "." for s in SKIP)):
            continue
        yield info.name
        if info.ispkg:
            yield from walk(importlib.import_module(info.name).__path__, info.name + ".")


names, failed = [], {}
for name in walk(gpuws.__path__, "gpuws."):
    names.append(name)
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"guard_works": guard_works, "modules": names, "failed": failed}))
'''


def test_every_client_module_imports_without_posix_only_modules(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "QT_QPA_PLATFORM": "offscreen",
           "GPUWS_CONFIG_DIR": str(tmp_path / "config")}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["guard_works"]
    modules = set(report["modules"])
    # The client's layers are all there (the walk found the packages), the host-side ones are not.
    assert {"gpuws.cli.main", "gpuws.ui.main_window", "gpuws.app.demo", "gpuws.remote.connection",
            "gpuws.core.runner"} <= modules  # fmt: skip
    assert not any(name.startswith(("gpuws.agent", "gpuws.sim")) for name in modules)
    assert report["failed"] == {}
