#!/usr/bin/env bash
# Builds dist/gpuws-<version>-macos-<arch>.dmg on macOS: freezes the app as gpuws.app with
# PyInstaller (the spec adds a BUNDLE step on macOS), then packs it with hdiutil into a
# compressed disk image with an Applications link to drag it onto. macOS only: PyInstaller
# freezes for the OS it runs on, and hdiutil/iconutil/sips are macOS tools.
#
#   installer/macos/build-dmg.sh
# Signing and notarisation (optional, needs an Apple Developer ID):
#   GPUWS_CODESIGN_ID="Developer ID Application: ..." installer/macos/build-dmg.sh
#   then: xcrun notarytool submit dist/gpuws-*.dmg --keychain-profile PROFILE --wait && xcrun stapler staple dist/gpuws-*.dmg
source "$(dirname "$0")/../_lib.sh"
[ "$(uname -s)" = Darwin ] || die "build-dmg.sh runs on macOS only (see installer/macos/README.md)"

# The .icns icon from the PNG renders (the spec uses build/gpuws.icns when it exists).
iconset="$ROOT/build/gpuws.iconset"
rm -rf "$iconset"; mkdir -p "$iconset"
for size in 16 32 128 256 512; do
  src="$ROOT/gpuws/resources/icons/gpuws-256.png"
  sips -z "$size" "$size" "$src" --out "$iconset/icon_${size}x${size}.png" >/dev/null
  double=$((size * 2))
  sips -z "$double" "$double" "$src" --out "$iconset/icon_${size}x${size}@2x.png" >/dev/null
done
iconutil -c icns "$iconset" -o "$ROOT/build/gpuws.icns"

freeze
app="$BUILD_DIR/frozen/gpuws.app"
[ -d "$app" ] || die "PyInstaller produced no $app"
if [ -n "${GPUWS_CODESIGN_ID:-}" ]; then
  log "signing with $GPUWS_CODESIGN_ID"
  codesign --force --deep --options runtime --timestamp --sign "$GPUWS_CODESIGN_ID" "$app"
fi

stage="$BUILD_DIR/dmg"
rm -rf "$stage"; mkdir -p "$stage"
cp -R "$app" "$stage/"
ln -s /Applications "$stage/Applications"
dmg="$DIST_DIR/gpuws-$VERSION-macos-$(uname -m).dmg"
rm -f "$dmg"
hdiutil create -volname "gpuws $VERSION" -srcfolder "$stage" -fs HFS+ -format UDZO -ov "$dmg" >/dev/null
log "disk image: $(du -h "$dmg" | cut -f1)"
"$PY" "$ROOT/installer/budgets.py" --tree "$app" --frozen "$app/Contents/MacOS/gpuws" --package "$dmg" \
  --json "$DIST_DIR/budgets-dmg.json" >&2
echo "$dmg"
