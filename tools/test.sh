#!/usr/bin/env bash
# Installs what cetcd needs, builds it and runs every test (ctest), then
# lists the tests that skipped and why (tools/ctest.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/tools/deps.sh"
bash "$root/tools/build.sh"
cd "$root/build"
# (each test has its own TIMEOUT in tests/CMakeLists.txt; 900 s is for
# one that has none)
bash "$root/tools/ctest.sh" --output-on-failure -j 2 --timeout 900
