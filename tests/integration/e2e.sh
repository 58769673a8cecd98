#!/usr/bin/env bash
# etcd 3.4's own end-to-end tests (tests/e2e/run.sh) on the list of those
# that pass against cetcd (tests/e2e/passing.list): each must pass.
# Exits 77 when Go, Debian's etcd sources or etcdctl are missing.
set -euo pipefail
: "${CETCD_BIN:?CETCD_BIN must name the directory of the built programs}"
: "${CETCD_SRC:?CETCD_SRC must name the source tree}"
exec bash "$CETCD_SRC/tests/e2e/run.sh" -t 120 -l "$CETCD_SRC/tests/e2e/passing.list"
