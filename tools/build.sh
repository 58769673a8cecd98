#!/usr/bin/env bash
# Configures and builds cetcd into BUILD_DIR (default: build/).
# Extra arguments go to cmake's configure step (e.g. -DCETCD_SANITIZE=ON).
# Warnings are errors here (a developer's or CI's build) unless
# CETCD_WERROR=OFF; a plain cmake configure leaves them warnings.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bdir=${BUILD_DIR:-$root/build}
cmake -S "$root" -B "$bdir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	-DCETCD_WERROR="${CETCD_WERROR:-ON}" "$@" >/dev/null
cmake --build "$bdir" -j "$(nproc)"
