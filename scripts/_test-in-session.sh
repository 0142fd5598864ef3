#!/usr/bin/env bash
# Runs inside `dbus-run-session`: starts an unlocked gnome-keyring on a throwaway keyring dir,
# then the checks. Never touches the developer's own keyring.
set -euo pipefail
cd "$(dirname "$0")/.."
export XDG_DATA_HOME
XDG_DATA_HOME=$(mktemp -d)
trap 'rm -rf "$XDG_DATA_HOME"' EXIT
eval "$(printf 'gpuws-test-keyring' | gnome-keyring-daemon --unlock --components=secrets 2>/dev/null)"
export QT_QPA_PLATFORM=offscreen
export GPUWS_TEST_SESSION=1  # tests/conftest.py: a missing sshd or keyring fails here, never skips
export PATH="$PWD/.venv/bin:$PATH"

echo "== ruff"; ruff check gpuws tests benchmarks
echo "== import contracts"; lint-imports
echo "== mypy --strict (everything but the on-host scripts)"; mypy
# The on-host scripts get their own run at a level they meet (see scripts/mypy-agent.ini).
echo "== mypy (agent)"; mypy --config-file scripts/mypy-agent.ini gpuws/agent/*.py
echo "== pytest"
set +e
python -m pytest "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi
exit $rc
