#!/usr/bin/env bash
# Installs what cetcd needs, builds it and runs every test (ctest).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/tools/deps.sh"
bash "$root/tools/build.sh"
cd "$root/build"
ctest --output-on-failure -j 2 --timeout 900
