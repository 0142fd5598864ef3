#!/usr/bin/env bash
# Runs inside `dbus-run-session`: starts an unlocked gnome-keyring on a throwaway keyring dir,
# then the checks. Never touches the developer's own keyring.
set -euo pipefail
cd "$(dirname "$0")/.."
export XDG_DATA_HOME
XDG_DATA_HOME=$(mktemp -d)
lint_log=$(mktemp)
# A short temporary root of this run's own: xdist adds popen-gwN/ to pytest's default one, and the
# demo host's tmux socket under a test's tmp dir then passes the 108-byte limit of a socket path.
# Each pass gets a fresh subfolder (pytest empties its --basetemp), never shared with another run.
test_tmp=$(mktemp -d /tmp/gpuws-t.XXXXXX)
trap 'rm -rf "$XDG_DATA_HOME" "$lint_log" "$test_tmp"' EXIT
eval "$(printf 'gpuws-test-keyring' | gnome-keyring-daemon --unlock --components=secrets 2>/dev/null)"
export QT_QPA_PLATFORM=offscreen
export GPUWS_TEST_SESSION=1  # tests/conftest.py: a missing sshd or keyring fails here, never skips
export PATH="$PWD/.venv/bin:$PATH"

# Lint, import contracts and types run beside the tests (mostly waiting on sshd and child
# processes, they leave CPU to spare); their output is printed once the tests are done.
(
  set -e
  echo "== ruff"; ruff check gpuws tests benchmarks
  echo "== import contracts"; lint-imports
  echo "== mypy --strict (everything but the on-host scripts)"; mypy
  # The on-host scripts get their own run at a level they meet (see scripts/mypy-agent.ini).
  echo "== mypy (agent)"; mypy --config-file scripts/mypy-agent.ini gpuws/agent/*.py gpuws/agent/bench
) >"$lint_log" 2>&1 &
lint_pid=$!

# Tests run on several workers (pytest-xdist): each has its own tmp dirs, ports are picked free,
# Prometheus is started per worker, Qt renders offscreen per process, and keyring entries use
# names unique to each test. Most tests wait on real servers and child processes, so twice as
# many workers as cores (at most 8) keep the CPUs busy. Tests in one xdist_group run one at a time
# on one worker (x-display: Xvnc takes the first free X display number). Tests marked `serial`
# (system-wide state, such as the .deb installed with dpkg) run alone afterwards.
workers=${GPUWS_TEST_WORKERS:-$(( $(nproc) * 2 > 8 ? 8 : $(nproc) * 2 ))}
set +e
echo "== pytest, $workers workers (everything not marked serial)"
python -m pytest -n "$workers" --dist loadgroup --basetemp "$test_tmp/p" -m "not serial" "$@"
parallel_rc=$?
echo "== pytest, alone (marked serial)"
python -m pytest -p no:xdist --basetemp "$test_tmp/s" -m serial "$@"
serial_rc=$?
wait "$lint_pid"
lint_rc=$?
cat "$lint_log"
set -e
# 5 is "no test collected": fine for one pass (arguments may select only serial tests or none).
if [ $parallel_rc -eq 5 ] && [ $serial_rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi
[ $parallel_rc -eq 5 ] && parallel_rc=0
[ $serial_rc -eq 5 ] && serial_rc=0
if [ $lint_rc -ne 0 ]; then echo "lint, import contracts or types failed (above)"; fi
for rc in $parallel_rc $serial_rc $lint_rc; do [ "$rc" -eq 0 ] || exit "$rc"; done
exit 0
