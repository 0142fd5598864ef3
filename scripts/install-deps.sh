#!/usr/bin/env bash
# Installs what gpuws needs on Debian/Ubuntu: system packages (as root, or via sudo), a venv,
# and the project itself with the given extras. Usage: scripts/install-deps.sh [runtime|test]
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-runtime}

# Qt's xcb/offscreen platform needs these; dbus + gnome-keyring give the Secret Service keyring.
runtime_pkgs=(python3 python3-venv libegl1 libgl1 libxkbcommon0 libxkbcommon-x11-0 libfontconfig1
  libdbus-1-3 libglib2.0-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0 libxcb-xinerama0
  libxcb-randr0 libxcb-render-util0 libxcb-image0 fonts-dejavu-core openssh-client)
test_pkgs=(openssh-server gnome-keyring dbus procps xvfb xauth binutils prometheus victoria-metrics)  # binutils: PyInstaller, deb Depends; prometheus, victoria-metrics: fleet tests (two real stores)
# gpuws desktop / shell tests (#24): a real Xvnc desktop, noVNC and tmux on the demo host.
test_pkgs+=(tigervnc-standalone-server tigervnc-tools websockify novnc tmux x11-xserver-utils openbox mesa-utils)
# The built-in VNC viewer's tests (#34): an xterm on the demo desktop reads the keys typed, xclip and
# xdotool drive the host's clipboard and windows; TigerVNC's own viewer is what the benchmark compares with.
test_pkgs+=(xterm xclip xdotool tigervnc-viewer)
pkgs=("${runtime_pkgs[@]}")
[ "$mode" = test ] && pkgs+=("${test_pkgs[@]}")

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "Installing system packages: ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

py=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$py" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
if [ "$mode" = test ]; then
  .venv/bin/python -m pip install -q -e '.[test]'
else
  .venv/bin/python -m pip install -q -e .
fi
