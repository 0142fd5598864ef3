# Shared by the installer scripts (sourced, not run). Sets ROOT, VERSION, PY, DIST_DIR, FROZEN_DIR
# and defines `freeze`, which builds the one-folder app with PyInstaller.
#
# Environment:
#   GPUWS_PYTHON     interpreter with gpuws and PyInstaller (default: .venv/bin/python, created by
#                    scripts/install-deps.sh when missing, with the `freeze` extra added)
#   GPUWS_DIST_DIR   where packages go (default: dist/)
#   GPUWS_BUILD_DIR  PyInstaller's work and output folders (default: build/)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIST_DIR=$(mkdir -p "${GPUWS_DIST_DIR:-$ROOT/dist}" && cd "${GPUWS_DIST_DIR:-$ROOT/dist}" && pwd)
BUILD_DIR=$(mkdir -p "${GPUWS_BUILD_DIR:-$ROOT/build}" && cd "${GPUWS_BUILD_DIR:-$ROOT/build}" && pwd)
FROZEN_DIR="$BUILD_DIR/frozen/gpuws"
PY=${GPUWS_PYTHON:-$ROOT/.venv/bin/python}

# The one source of truth for the version; read as text so no import (and no Qt) is needed.
VERSION=$(sed -n 's/^__version__ *= *"\([^"]*\)".*/\1/p' "$ROOT/gpuws/__init__.py")
[ -n "$VERSION" ] || { echo "error: no __version__ in gpuws/__init__.py" >&2; exit 1; }

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

ensure_build_env() {
  if [ ! -x "$PY" ]; then
    [ -z "${GPUWS_PYTHON:-}" ] || die "GPUWS_PYTHON=$PY is not an executable"
    log "creating the venv (scripts/install-deps.sh runtime)"
    bash "$ROOT/scripts/install-deps.sh" runtime
  fi
  if ! "$PY" -c 'import PyInstaller' 2>/dev/null; then
    log "installing PyInstaller (the project's freeze extra)"
    "$PY" -m pip install -q -e "$ROOT[freeze]"
  fi
  "$PY" -c 'import gpuws' 2>/dev/null || "$PY" -m pip install -q -e "$ROOT"
}

# Builds $FROZEN_DIR (the `gpuws` launcher and `_internal/`) from the working tree.
freeze() {
  ensure_build_env
  log "freezing gpuws $VERSION with PyInstaller"
  local started=$SECONDS
  (cd "$ROOT" && "$PY" -m PyInstaller packaging/gpuws.spec --noconfirm --log-level WARN \
      --distpath "$BUILD_DIR/frozen" --workpath "$BUILD_DIR/pyinstaller")
  [ -x "$FROZEN_DIR/gpuws" ] || die "PyInstaller produced no $FROZEN_DIR/gpuws"
  log "frozen app: $FROZEN_DIR ($((SECONDS - started)) s)"
}

# Runs `freeze` unless the caller (build-all.sh) already did: --skip-freeze.
maybe_freeze() {
  case "${1:-}" in
    --skip-freeze) [ -x "$FROZEN_DIR/gpuws" ] || die "--skip-freeze, but there is no frozen app at $FROZEN_DIR" ;;
    "") freeze ;;
    *) die "unknown option: $1 (the only one is --skip-freeze)" ;;
  esac
}
