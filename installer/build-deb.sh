#!/usr/bin/env bash
# Builds dist/gpuws_<version>_<arch>.deb from this checkout: freezes the app with PyInstaller,
# lays out the installed tree, derives Depends from what the bundle links against, and packs it
# with dpkg-deb (as root or not: --root-owner-group, no fakeroot needed). Prints the package
# path on stdout last, and the size and start-up budgets on stderr.
#
#   installer/build-deb.sh [--skip-freeze]     (--skip-freeze: reuse build/frozen, as build-all.sh does)
#
# GPUWS_DEB_COMPRESSION=gzip packs faster (about 20 s instead of 2 min on 2 cores, 30% larger);
# the installing test uses it. Releases use the default, xz.
#
# Installed layout:
#   /opt/gpuws/                        the frozen app (launcher `gpuws` and `_internal/`)
#   /usr/bin/gpuws                     -> /opt/gpuws/gpuws
#   /usr/share/applications/gpuws.desktop
#   /usr/share/icons/hicolor/<N>x<N>/apps/gpuws.png, scalable/apps/gpuws.svg
#   /usr/share/metainfo/io.github.gpuws.metainfo.xml
#   /usr/share/doc/gpuws/copyright
# No maintainer scripts: hicolor-icon-theme and desktop-file-utils refresh their caches through
# dpkg triggers, and the package never writes outside the files it ships.
source "$(dirname "$0")/_lib.sh"

command -v dpkg-deb >/dev/null || die "dpkg-deb not found: build the .deb on Debian or Ubuntu"
maybe_freeze "${1:-}"

ARCH=$(dpkg --print-architecture)
# Debian orders 1.0~rc1 before 1.0; PEP 440 writes 1.0rc1 (also a/b/.dev).
DEB_VERSION=$(sed -E 's/\.?(a|b|rc|dev)([0-9]+)/~\1\2/' <<<"$VERSION")
RES="$ROOT/gpuws/resources"
stage="$BUILD_DIR/deb/gpuws_${DEB_VERSION}_${ARCH}"
rm -rf "$stage"
mkdir -p "$stage/DEBIAN" "$stage/opt" "$stage/usr/bin" "$stage/usr/share/applications" \
  "$stage/usr/share/metainfo" "$stage/usr/share/doc/gpuws" "$stage/usr/share/icons/hicolor/scalable/apps"

log "laying out the package tree"
cp -a "$FROZEN_DIR" "$stage/opt/gpuws"
ln -s /opt/gpuws/gpuws "$stage/usr/bin/gpuws"
install -m 644 "$RES/gpuws.desktop" "$stage/usr/share/applications/gpuws.desktop"
install -m 644 "$FROZEN_DIR/_internal/share/metainfo/io.github.gpuws.metainfo.xml" "$stage/usr/share/metainfo/"
install -m 644 "$RES/icons/gpuws.svg" "$stage/usr/share/icons/hicolor/scalable/apps/gpuws.svg"
for png in "$RES"/icons/gpuws-*.png; do
  size=$(basename "$png" .png); size=${size#gpuws-}
  install -D -m 644 "$png" "$stage/usr/share/icons/hicolor/${size}x${size}/apps/gpuws.png"
done
cat >"$stage/usr/share/doc/gpuws/copyright" <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: gpuws
Source: https://github.com/gpuws/gpuws

Files: *
Copyright: gpuws developers
License: MIT

Files: opt/gpuws/_internal/*
Comment: The bundled Python runtime and libraries (Qt for Python, pyqtgraph, numpy, asyncssh,
 cryptography, ...) keep their own licences; see the dist-info folders beside them.
EOF
# Normalise modes whatever the umask was: directories 755, files 644, executables 755.
chmod -R u=rwX,go=rX "$stage"
find "$stage" -type d -exec chmod 755 {} +

log "deriving Depends from the bundle's libraries"
mapfile -t lib_pkgs < <(bash "$ROOT/installer/deb-depends.sh" "$stage/opt/gpuws")
# Loaded with dlopen, so no NEEDED entry names them: D-Bus (QtDBus: keyring, portals) and a font.
depends=$(printf '%s\n' "${lib_pkgs[@]}" libdbus-1-3 | sort -u | paste -sd, | sed 's/,/, /g')
depends="$depends, fonts-dejavu-core | fonts-liberation2 | fonts-noto-core"

installed_kib=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat >"$stage/DEBIAN/control" <<EOF
Package: gpuws
Version: $DEB_VERSION
Architecture: $ARCH
Maintainer: gpuws developers <gpuws@users.noreply.github.com>
Installed-Size: $installed_kib
Depends: $depends
Recommends: openssh-client
Suggests: gnome-keyring
Section: utils
Priority: optional
Homepage: https://github.com/gpuws/gpuws
Description: desktop workstation manager for cloud GPU sessions
 gpuws connects to cloud GPU machines over SSH, shows what GPUs a host really
 has, graphs live telemetry, runs CUDA benchmarks against datasheet figures,
 resizes MIG and vGPU slices, manages tunnels and keeps track of cost.
 .
 A built-in simulated GPU host (gpuws --demo) lets you try it without a
 cloud account. The application is self-contained under /opt/gpuws.
EOF
(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z \
  | xargs -0 md5sum >DEBIAN/md5sums)
chmod 644 "$stage/DEBIAN/control" "$stage/DEBIAN/md5sums"

deb="$DIST_DIR/gpuws_${DEB_VERSION}_${ARCH}.deb"
log "packing $deb"
compression=${GPUWS_DEB_COMPRESSION:-xz}
case "$compression" in
  xz | gzip) ;;
  *) die "GPUWS_DEB_COMPRESSION must be xz or gzip, not $compression" ;;
esac
# xz at level 6 on all cores is the usual .deb compression, readable by every dpkg; older dpkg
# has no --threads-max.
dpkg-deb --root-owner-group -Z"$compression" -z6 --threads-max="$(nproc)" --build "$stage" "$deb" >/dev/null 2>&1 \
  || dpkg-deb --root-owner-group -Z"$compression" -z6 --build "$stage" "$deb" >/dev/null

"$PY" "$ROOT/installer/budgets.py" --tree "$stage" --exclude DEBIAN --frozen "$stage/opt/gpuws/gpuws" \
  --package "$deb" --json "$DIST_DIR/budgets-deb.json" >&2
echo "$deb"
