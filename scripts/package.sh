#!/usr/bin/env bash
# Builds softrdma's Debian package: a release build installed under /usr, then cpack. Prints the
# .deb's path on its last line. Install it with `sudo apt-get install ./PATH`.
#
# usage: scripts/package.sh [BUILD]   (BUILD: the build folder, default build/package)
# Environment: JOBS (default: nproc).
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,6s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
build=${1:-build/package}
JOBS=${JOBS:-$(nproc)}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
cmake --build "$build" -j "$JOBS" --target package_contents
log=$(cd "$build" && cpack -G DEB 2>&1) || { echo "$log" >&2; echo "package.sh: cpack failed" >&2; exit 1; }
sed -n 's/^CPack: - package: \(.*\.deb\) generated\.$/\1/p' <<<"$log"
