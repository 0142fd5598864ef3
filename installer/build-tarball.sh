#!/usr/bin/env bash
# Builds dist/gpuws-<version>-linux-<machine>.tar.gz: the frozen one-folder app, for Linux users
# who do not use .deb packages. Unpack anywhere and run gpuws-<version>/gpuws; share/ holds the
# desktop entry, icons and AppStream file to copy under ~/.local/share (see docs/PACKAGING.md).
# Needs the same system libraries the .deb declares (X11/xcb, fontconfig, GL, D-Bus).
#
#   installer/build-tarball.sh [--skip-freeze]
source "$(dirname "$0")/_lib.sh"
maybe_freeze "${1:-}"

name="gpuws-$VERSION-linux-$(uname -m)"
top="gpuws-$VERSION"
stage="$BUILD_DIR/tarball"
rm -rf "$stage"
mkdir -p "$stage"
cp -a "$FROZEN_DIR" "$stage/$top"
res="$ROOT/gpuws/resources"
share="$stage/$top/share"
install -D -m 644 "$res/gpuws.desktop" "$share/applications/gpuws.desktop"
install -D -m 644 "$FROZEN_DIR/_internal/share/metainfo/io.github.gpuws.metainfo.xml" "$share/metainfo/io.github.gpuws.metainfo.xml"
install -D -m 644 "$res/icons/gpuws.svg" "$share/icons/hicolor/scalable/apps/gpuws.svg"
for png in "$res"/icons/gpuws-*.png; do
  size=$(basename "$png" .png); size=${size#gpuws-}
  install -D -m 644 "$png" "$share/icons/hicolor/${size}x${size}/apps/gpuws.png"
done
chmod -R u=rwX,go=rX "$stage"

tarball="$DIST_DIR/$name.tar.gz"
log "packing $tarball"
# Owner and group 0, sorted names: the archive does not depend on who built it.
tar -C "$stage" --owner=0 --group=0 --numeric-owner --sort=name -czf "$tarball" "$top"
log "tarball: $(du -h "$tarball" | cut -f1), unpacked $(du -sh "$stage/$top" | cut -f1)"
echo "$tarball"
