#!/usr/bin/env bash
# stored installs a db that etcd wrote, as a follower of an etcd leader
# receives it: Debian's etcd takes puts, overwrites and deletes under
# etcd/, `etcdctl snapshot save` copies its db (the trailing SHA-256 is
# cut off: raftd receives the bare db), and test_stored_install's etcd
# phase hands it to a running stored in MSG_SNAPSHOT_INSTALL at its
# consistent index. stored must check it, build cetcd's index for it, and
# publish exactly etcd's keys at etcd's revision.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

it_need_etcd
it_need_etcdctl
t=$IT_BUILD/tests/test_stored_install
[[ -x $t ]] || it_skip "$t is not built"
it_init install_etcd
export ETCDCTL_API=3

it_etcd_start e1 "$IT_TMP/e1" "$IT_TMP/e1.log"
check "etcd is healthy" it_wait_healthy "$IT_ETCD_PORT" 30
ep=127.0.0.1:$IT_ETCD_PORT
for i in $(seq 1 120); do
	etcdctl --endpoints "$ep" put "etcd/$(printf %04d "$i")" "value-$i" >/dev/null
done
for i in $(seq 1 40); do
	etcdctl --endpoints "$ep" put "etcd/$(printf %04d "$i")" "again-$i" >/dev/null
done
etcdctl --endpoints "$ep" del etcd/0100 >/dev/null
etcdctl --endpoints "$ep" del etcd/0050 etcd/0060 >/dev/null
lease=$(etcdctl --endpoints "$ep" lease grant 600 | awk '{ print $2 }')
etcdctl --endpoints "$ep" put etcd/leased v --lease "$lease" >/dev/null
keys=$(etcdctl --endpoints "$ep" get etcd/ --prefix --keys-only | grep -c .)
check "etcd took the puts ($keys keys)" test "$keys" -eq 110
check "etcdctl snapshot save from etcd" \
	etcdctl --endpoints "$ep" snapshot save "$IT_TMP/etcd.db"
rev=$(etcdctl snapshot status "$IT_TMP/etcd.db" -w json |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["revision"])')
truncate -s -32 "$IT_TMP/etcd.db"

STORED_ETCD_DB=$IT_TMP/etcd.db STORED_ETCD_KEYS=$keys STORED_ETCD_REV=$rev \
	"$t" >"$IT_TMP/install.out" 2>&1 || true
sed -n '/etcd.s db/p;/CHECK/p;/^ok/p' "$IT_TMP/install.out" | sed 's/^/    /'
check "stored installed etcd's db: its $keys keys at revision $rev, and applies after it" \
	grep -q "installed: revision $((rev + 1)), $keys keys under etcd/" "$IT_TMP/install.out"
check "test_stored_install passed" grep -q '^ok: ' "$IT_TMP/install.out"
it_summary
