#!/usr/bin/env bash
# Developer shortcut: run pytest (arguments passed on) under a private D-Bus session with a
# throwaway unlocked gnome-keyring and offscreen Qt, as scripts/test.sh does, without the lint,
# import-contract and mypy steps. Needs `bash scripts/install-deps.sh test` to have run once.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${GPUWS_VENV:-$PWD/.venv}
exec dbus-run-session -- bash -c '
  set -euo pipefail
  export XDG_DATA_HOME; XDG_DATA_HOME=$(mktemp -d); trap "rm -rf \"$XDG_DATA_HOME\"" EXIT
  eval "$(printf gpuws-test-keyring | gnome-keyring-daemon --unlock --components=secrets 2>/dev/null)"
  export QT_QPA_PLATFORM=offscreen GPUWS_TEST_SESSION=1 PATH="$1/bin:$PATH" PYTHONPATH="$PWD"
  # A short temporary root, as scripts/_test-in-session.sh uses: under xdist (-n) pytest'"'"'s default
  # one makes the demo host'"'"'s tmux socket path pass the 108-byte limit.
  base=$(mktemp -d /tmp/gpuws-t.XXXXXX); trap "rm -rf \"$XDG_DATA_HOME\" \"$base\"" EXIT
  shift; python -m pytest --basetemp "$base/p" "$@"' _ "$venv" "$@"
