#!/usr/bin/env bash
# Prints, one per line, the Debian packages providing the system libraries that the frozen app
# in DIR links against: the NEEDED entries of every ELF file in DIR (Qt's libraries and platform
# plugins, Python's extension modules, ...) that DIR does not carry itself, each located with
# ldconfig and mapped to its package with `dpkg -S`. Like dpkg-shlibdeps, but for a tree that
# is not a Debian source package. Fails, naming them, when a library is not installed here.
#
#   installer/deb-depends.sh build/frozen/gpuws
set -euo pipefail
dir=${1:?usage: deb-depends.sh FROZEN_DIR}
arch_re='x86-64'
case "$(dpkg --print-architecture)" in
  arm64) arch_re='AArch64' ;;
  i386) arch_re='libc6,' ;;
esac

bundled=$(find "$dir" \( -type f -o -type l \) -name '*.so*' -printf '%f\n' | sort -u)
needed=$(
  find "$dir" -type f \( -name '*.so*' -o -perm -u+x \) -print0 |
    while IFS= read -r -d '' f; do
      # Not every executable file is ELF (scripts); readelf just says no for those.
      readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
    done | sort -u
)

missing=()
paths=()
for soname in $needed; do
  grep -qxF "$soname" <<<"$bundled" && continue
  path=$(ldconfig -p | awk -v n="$soname" -v a="$arch_re" '!found && $1 == n && index($0, a) { print $NF; found = 1 }')
  if [ -z "$path" ]; then missing+=("$soname"); continue; fi
  paths+=("$path")
done
[ ${#missing[@]} -eq 0 ] || { echo "error: libraries needed by the bundle are not installed: ${missing[*]}" >&2; exit 1; }

for path in "${paths[@]}"; do
  # dpkg knows a library under the path its package shipped; with merged /usr that may be the
  # /lib or the /usr/lib spelling, or the symlink's target.
  for candidate in "$path" "$(readlink -f "$path")" "/usr${path#/usr}" "${path#/usr}"; do
    if owner=$(dpkg -S "$candidate" 2>/dev/null); then
      owner=${owner%%$'\n'*}  # diversions add lines; the first names the owner
      echo "${owner%%:*}"
      continue 2
    fi
  done
  echo "error: no installed package owns $path" >&2
  exit 1
done | sed 's/:.*//' | sort -u
