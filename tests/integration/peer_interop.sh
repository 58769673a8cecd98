#!/bin/bash
# cetcd's peer transport (raftd/peer*.c) against etcd 3.4's own rafthttp
# transport: builds tests/tools/peerinterop (etcd's rafthttp.Transport
# with a stub Raft, on Debian's Go packages) and runs
# tests/unit/raftd/peer/test_peer_interop.c against it, which exchanges every kind of
# message both ways over the pipeline and both streams. Exits 77 when go
# or etcd's Go packages are missing.
source "$(dirname "$0")/lib.sh"

it_build_go_tool peerinterop go.etcd.io/etcd/etcdserver/api/rafthttp
prog=$IT_BUILD/tests/unit/raftd/peer/test_peer_interop
[[ -x $prog ]] || { echo "FAIL: $prog is not built"; exit 1; }
PEER_INTEROP_GO=$IT_BUILD/tests/peerinterop exec "$prog"
