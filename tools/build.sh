#!/usr/bin/env bash
# Configures and builds cetcd into BUILD_DIR (default: build/).
# Extra arguments go to cmake's configure step (e.g. -DCETCD_SANITIZE=ON).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bdir=${BUILD_DIR:-$root/build}
cmake -S "$root" -B "$bdir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$bdir" -j "$(nproc)"
