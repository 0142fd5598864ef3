"""Entry point of the frozen gpuws app (PyInstaller one-folder build).

The frozen `gpuws` binary is also the Python interpreter of the built-in simulated GPU host:
`gpuws.sim.server` writes `nvidia-smi` and `python3` wrappers that exec `sys.executable`, and
in a frozen app `sys.executable` is this binary, not a python. So, besides the normal CLI, this
entry understands the few interpreter invocations the demo host (and the scripts gpuws sends to
hosts) use:

    gpuws -m MODULE ARGS...     run a bundled module as __main__ (e.g. gpuws.sim.nvidia_smi)
    gpuws -c CODE ARGS...       run CODE (the probe's `python3 -c` module check)
    gpuws - ARGS...             run the script read from stdin (the telemetry agent)
    gpuws FILE.py ARGS...       run a script file
    gpuws FILE.pyz ARGS...      run a zipapp (the benchmark runner, sent as one zip)

optionally preceded by `-u` / `-B`. $PYTHONPATH is honoured (the PyInstaller bootloader
ignores it), so the simulated host's fake `pynvml` shadows nothing else. The gpuws CLI itself
never takes `-m`, `-c`, `-` or a `.py` or `.pyz` file as its first argument, so the two cannot be confused.

It also runs unfrozen (`python packaging/gpuws_entry.py ...`), which is how it is tested quickly.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
import types
from collections.abc import Sequence

# Interpreter options accepted and ignored: unbuffered output and no .pyc writing change nothing
# the scripts observe here (they flush their own output).
_IGNORED_FLAGS = frozenset({"-u", "-B"})


def interpreter_call(args: Sequence[str]) -> tuple[str, str, list[str]] | None:
    """(mode, target, script args) when ARGS are a python-interpreter call, else None.

    mode is "module", "code", "stdin" or "file".
    """
    rest = list(args)
    while rest and rest[0] in _IGNORED_FLAGS:
        rest.pop(0)
    if not rest:
        return None
    first = rest[0]
    if first in ("-m", "-c") and len(rest) >= 2:
        return ("module" if first == "-m" else "code"), rest[1], rest[2:]
    if first == "-":
        return "stdin", "-", rest[1:]
    if first.endswith((".py", ".pyz")) and os.path.isfile(first):
        return "file", first, rest[1:]
    return None


def _prepend_pythonpath(first_entry: str) -> None:
    """Like the interpreter: script dir (or cwd) first, then $PYTHONPATH, then the bundle."""
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[0:0] = [first_entry, *extra]


def _exec_as_main(source: str, filename: str) -> None:
    main = types.ModuleType("__main__")
    main.__file__ = filename
    sys.modules["__main__"] = main  # dataclasses, pickle and friends look the module up here
    exec(compile(source, filename, "exec"), main.__dict__)  # noqa: S102 - this *is* the interpreter


def run_interpreter(mode: str, target: str, script_args: list[str]) -> int:
    """Run TARGET the way `python3` would; returns the exit status."""
    # Never write __pycache__ next to bundled files (the fake pynvml): the install tree must stay
    # exactly what the package put there, or uninstalling leaves directories behind.
    sys.dont_write_bytecode = True
    try:
        if mode == "module":
            sys.argv = [target, *script_args]  # runpy replaces argv[0] with the module's path
            _prepend_pythonpath(os.getcwd())
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        elif mode == "file":
            sys.argv = [target, *script_args]
            _prepend_pythonpath(os.path.dirname(os.path.abspath(target)))
            runpy.run_path(target, run_name="__main__")
        else:
            sys.argv = ["-c" if mode == "code" else "-", *script_args]
            _prepend_pythonpath("")
            source = target if mode == "code" else sys.stdin.read()
            _exec_as_main(source, "<string>" if mode == "code" else "<stdin>")
    except SystemExit as exc:
        code = exc.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BaseException:  # an uncaught error in the script: report it as python3 would
        traceback.print_exc()
        return 1
    return 0


def main() -> int:
    call = interpreter_call(sys.argv[1:])
    if call is not None:
        return run_interpreter(*call)
    from gpuws.cli.main import main as gpuws_main

    return gpuws_main()


if __name__ == "__main__":
    sys.exit(main())
