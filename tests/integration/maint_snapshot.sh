#!/usr/bin/env bash
# Maintenance.Snapshot (gatewayd/services/snapshot.c) with etcd's own tools:
#  - `etcdctl snapshot save` from a cetcd member while etcd's Go client
#    (kvclient) writes through it; the writes go on meanwhile;
#  - `etcdctl snapshot status` accepts each file, and `etcdctl snapshot
#    restore` accepts it with its SHA-256 checked (no --skip-hash-check);
#  - Debian's etcd, and cetcd, started on a restored data dir serve every
#    put acknowledged at or below the snapshot's revision, with its value
#    and mod revision (kvclient check), and nothing newer;
#  - a client that reads a snapshot of tens of MB slowly (snapslow) holds
#    the stream on HTTP/2 flow control: the one gatewayd keeps answering
#    another connection's gets meanwhile, in every quarter of the stream,
#    and does not spin: the CPU it uses beyond what a fast read of the same
#    snapshot costs it is a small part of the time the slow reader waits
#    (both measured in this run, so the machine's speed cancels out).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

it_need_cetcd
it_need_etcdctl
it_need_etcd
it_init maint_snapshot
it_build_kvclient
it_build_go_tool snapslow go.etcd.io/etcd/clientv3

export ETCDCTL_API=3
it_cetcd_start n1 "$IT_TMP/n1" "$IT_TMP/n1.log" --gateways 1
check "the member is healthy" it_wait_healthy "$IT_CPORT" 30
ep=127.0.0.1:$IT_CPORT

it_kv_start "$IT_TMP/kv.out" write -endpoint "$ep" -prefix /snap -acks "$IT_TMP/acks" \
	-writers 2 -value-size 2000 -duration 120s
check "the writers have puts acknowledged" it_wait_lines "$IT_TMP/acks" 1500 60

# save N: a snapshot into snap.N while the writers go on; prints its
# revision (etcdctl snapshot status).
save() {
	local f=$IT_TMP/snap.$1
	etcdctl --endpoints "$ep" --command-timeout 60s snapshot save "$f" >"$f.log" 2>&1 ||
		{ echo "  (snapshot save: $(tail -1 "$f.log"))" >&2; return 1; }
	etcdctl snapshot status "$f" -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)["revision"])'
}
at=$(it_lines "$IT_TMP/acks")
rev0=$(save 0) || rev0=0
rev1=$(save 1) || rev1=0
check "two snapshots saved under writes, status accepts them (revisions $rev0, $rev1)" \
	test "$rev0" -gt 0 -a "$rev1" -ge "$rev0"
check "the writers went on during the saves" it_wait_lines "$IT_TMP/acks" $((at + 100)) 30
check "kvclient's checks held" it_kv_stop "$IT_KV_PID" "$IT_TMP/kv.out"
size=$(stat -c %s "$IT_TMP/snap.1")
check "the snapshot spans many messages ($size bytes)" test "$size" -gt $((4 << 20))
check "gatewayd logged the snapshot it sent" \
	it_log_has "$IT_TMP/n1.log" '"sent database snapshot to client"' 2

# A slow reader: 64 KiB every 10 ms of a db of some 30 MB; then the same
# snapshot read as fast as the client can, the baseline for gatewayd's CPU.
gw=$(it_cetcd_child gatewayd-0)
slow_st=0 fast_st=0
"$IT_BUILD/tests/snapslow" -endpoint "$ep" -out "$IT_TMP/slow.db" -puts 400 -value-size 65536 \
	-chunk 65536 -delay 10ms -cpu-pid "$gw" >"$IT_TMP/slow.out" 2>"$IT_TMP/slow.err" || slow_st=$?
"$IT_BUILD/tests/snapslow" -endpoint "$ep" -out "$IT_TMP/fast.db" -puts 0 \
	-chunk 65536 -delay 0 -cpu-pid "$gw" >"$IT_TMP/fast.out" 2>"$IT_TMP/fast.err" || fast_st=$?
sed 's/^/    snapslow: /' "$IT_TMP/slow.out" "$IT_TMP/slow.err"
sed 's/^/    snapslow, fast: /' "$IT_TMP/fast.out" "$IT_TMP/fast.err"
slow() { awk -v n="$1" '$1 == n { $1 = ""; print substr($0, 2) }' "$IT_TMP/${2:-slow}.out"; }
check "the slow client got the whole snapshot and its checksum matched (exit $slow_st)" \
	test "$slow_st" = 0 -a "$(slow sha)" = ok
check "so did the fast one (exit $fast_st)" test "$fast_st" = 0 -a "$(slow sha fast)" = ok
slow_ms=$(slow read-ms) fast_ms=$(slow read-ms fast)
check "the slow read took a while ($slow_ms ms; 10 ms pauses alone add up to 4 s)" \
	test "${slow_ms:-0}" -gt 2000
# A gatewayd that served gets only behind the stream would answer none of
# them before the stream ended. (Their times are figures, not checks.)
read -r q1 q2 q3 q4 <<<"$(slow gets-by-quarter)"
echo "    gets during the slow read: $(slow gets), median $(slow get-p50-ms) ms, at most $(slow get-max-ms) ms"
check "gets on another connection were answered throughout the stream ($q1, $q2, $q3, $q4 per quarter)" \
	test "${q1:-0}" -ge 3 -a "${q2:-0}" -ge 3 -a "${q3:-0}" -ge 3 -a "${q4:-0}" -ge 3
# A loop kept awake while the stream waits burns CPU in proportion to the
# wait; sending the bytes costs what the fast read cost, whatever the
# machine. The slow read waits some 4 s more than the fast one.
slow_cpu=$(slow server-cpu-ms) fast_cpu=$(slow server-cpu-ms fast)
check "gatewayd did not spin while the stream waited ($slow_cpu ms of CPU in $slow_ms ms, $fast_cpu ms in $fast_ms ms when read fast)" \
	test -n "$slow_cpu" -a -n "$fast_cpu" -a $(((${slow_cpu:-0} - ${fast_cpu:-0}) * 3)) -lt $((${slow_ms:-0} - ${fast_ms:-0}))
truncate -s -32 "$IT_TMP/slow.db"
check "the slow copy is a db bbolt opens (etcdctl snapshot status)" \
	etcdctl snapshot status "$IT_TMP/slow.db"

# The acknowledged puts a snapshot at revision $1 must hold.
awk -v r="$rev1" '$3 <= r' "$IT_TMP/acks" >"$IT_TMP/acks.in"
awk -v r="$rev1" '$3 > r' "$IT_TMP/acks" >"$IT_TMP/acks.out"
echo "  $(it_lines "$IT_TMP/acks.in") puts at or below revision $rev1, $(it_lines "$IT_TMP/acks.out") after"

# A corrupted copy fails restore's hash check.
cp "$IT_TMP/snap.1" "$IT_TMP/bad.db"
printf 'x' | dd of="$IT_TMP/bad.db" bs=1 seek=$((3 * 4096 + 100)) conv=notrunc status=none
check "restore refuses a copy whose bytes changed (sha256 check)" \
	bash -c "! etcdctl snapshot restore '$IT_TMP/bad.db' --data-dir '$IT_TMP/bad' >'$IT_TMP/bad.log' 2>&1"
check "  ... saying why" grep -q "expected sha256" "$IT_TMP/bad.log"

# kv_exact EP: the puts at or below the revision are there, none after.
kv_exact() {
	"$KVCLIENT" check -endpoint "$1" -prefix /snap -acks "$IT_TMP/acks.in" >"$IT_TMP/check.out" 2>&1 ||
		{ it_kv_show "$IT_TMP/check.out" 'error|violation' | head -5; return 1; }
	local n
	n=$(etcdctl --endpoints "$1" get /snap --prefix --keys-only --limit 1 -w json |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("count", 0))')
	[[ $n == $(it_lines "$IT_TMP/acks.in") ]] || { echo "  ($n keys under /snap)"; return 1; }
}

# Debian's etcd on the restored dir (it_etcd_start restores with the hash
# check skipped; check it here first).
check "etcdctl snapshot restore checks and accepts the hash" \
	etcdctl snapshot restore "$IT_TMP/snap.1" --data-dir "$IT_TMP/hashcheck"
it_etcd_start e1 "$IT_TMP/e1" "$IT_TMP/e1.log" "$IT_TMP/snap.1"
check "etcd starts on the restored snapshot" it_wait_healthy "$IT_ETCD_PORT" 30
check "etcd serves exactly the puts at or below revision $rev1" kv_exact "127.0.0.1:$IT_ETCD_PORT"
kill -TERM "$IT_ETCD_PID"
it_wait_gone "$IT_ETCD_PID" 10000 || true

# cetcd on a dir restored for it.
it_cetcd_stop || true
read -r IT_CPORT IT_PPORT < <(it_free_ports 2)
check "etcdctl restores the snapshot for a cetcd member" \
	etcdctl snapshot restore "$IT_TMP/snap.1" --name n2 --data-dir "$IT_TMP/n2" \
	--initial-cluster "n2=http://127.0.0.1:$IT_PPORT" \
	--initial-advertise-peer-urls "http://127.0.0.1:$IT_PPORT"
it_cetcd_start n2 "$IT_TMP/n2" "$IT_TMP/n2.log"
check "cetcd starts on the restored snapshot" it_wait_healthy "$IT_CPORT" 30
check "cetcd serves exactly the puts at or below revision $rev1" kv_exact "127.0.0.1:$IT_CPORT"
it_summary
