#!/usr/bin/env bash
# Installs gpuws and opens it connected to the built-in simulated GPU host (no cloud account needed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh runtime
exec .venv/bin/gpuws --demo "$@"
