#!/usr/bin/env bash
# Builds every installer this OS can build, freezing the app once: on Debian/Ubuntu the .deb and
# the .tar.gz, on macOS the .dmg. Windows: see installer/windows/README.md (Inno Setup).
# Packages land in dist/.
source "$(dirname "$0")/_lib.sh"
case "$(uname -s)" in
  Linux)
    freeze
    bash "$ROOT/installer/build-tarball.sh" --skip-freeze
    if command -v dpkg-deb >/dev/null; then
      bash "$ROOT/installer/build-deb.sh" --skip-freeze
    else
      log "no dpkg-deb: skipping the .deb (build it on Debian or Ubuntu)"
    fi
    ;;
  Darwin) bash "$ROOT/installer/macos/build-dmg.sh" ;;
  *) die "build the Windows installer with Inno Setup: see installer/windows/README.md" ;;
esac
log "packages in $DIST_DIR:"
ls -l "$DIST_DIR" >&2
