#!/usr/bin/env bash
# Installs what cetcd needs, builds it and runs a single-member cetcd on
# 127.0.0.1:2379 in the foreground (data in ./default.etcd, as etcd does).
# Extra arguments are passed to the cetcd launcher.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/tools/deps.sh"
# a user's build: a warning from another compiler never stops it
CETCD_WERROR=OFF bash "$root/tools/build.sh"
exec "$root/build/bin/cetcd" "$@"
