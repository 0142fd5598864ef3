#!/usr/bin/env bash
# Installs everything the tests need (fresh Debian is fine), then runs lint, import contracts,
# types and the whole test suite under a private D-Bus session with a real gnome-keyring.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh test
exec dbus-run-session -- bash scripts/_test-in-session.sh "$@"
