#!/usr/bin/env bash
# .snap files and the WAL's snapshot records between Debian's etcd 3.4
# and cetcd, on one data dir, with --snapshot-count 100:
#   1. cetcd writes: its member/snap holds .snap files (at most
#      --max-snapshots of them) and it restarts from the newest one
#      ("recovered v2 store from snapshot") with every key;
#   2. etcd starts on that data dir: it recovers its store from cetcd's
#      newest .snap (its log says so), lists the member and has every key;
#      it writes more, taking .snap files of its own;
#   3. cetcd starts on the data dir etcd left: from etcd's newest .snap,
#      with every key of both, and takes writes.
# Exits 77 when the programs or Debian's etcd and etcdctl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_init snapinterop

ctl() { ETCDCTL_API=3 etcdctl --dial-timeout 2s --command-timeout 10s --endpoints "127.0.0.1:$IT_CPORT" "$@"; }
# puts FROM TO: keys k<FROM>..k<TO>, one put (one raft entry) each
puts() {
	local i
	for ((i = $1; i <= $2; i++)); do
		ctl put "k$i" "v$i" >/dev/null || return 1
	done
}
keys() { ctl get k --prefix --keys-only | grep -c '^k' || true; }
# newest DIR: the index (decimal) of the newest .snap file in DIR
newest() {
	local h
	h=$(ls "$1" | sed -n 's/^[0-9a-f]\{16\}-\([0-9a-f]\{16\}\)\.snap$/\1/p' | sort | tail -1)
	echo $((16#${h:-0}))
}
snaps() { ls "$1" | grep -c '\.snap$' || true; }

data=$IT_TMP/m1
snapdir=$data/member/snap
it_cetcd_start m1 "$data" "$IT_TMP/cetcd1.log" --snapshot-count 100 --max-snapshots 3
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30
check "cetcd takes 350 puts" puts 1 350
check "cetcd saved .snap files" it_wait_log "$IT_CETCD_LOG" '"msg":"saved snapshot"' 10 3
three_snaps() { (($(snaps "$snapdir") == 3)); }
check "--max-snapshots 3 keeps 3 of them" it_until 5000 three_snaps
n1=$(newest "$snapdir")
echo "  cetcd's newest .snap is at index $n1"
check "it is past index 200 (snapshots every 100 entries)" test "$n1" -gt 200

check "cetcd stops" it_cetcd_stop
it_cetcd_restart "$IT_TMP/cetcd2.log"
check "cetcd restarts" it_wait_healthy "$IT_CPORT" 30
check "from its newest .snap" \
	it_log_has "$IT_CETCD_LOG" "\"msg\":\"recovered v2 store from snapshot\",\"snapshot-index\":$n1," 1
check "with every key" test "$(keys)" -eq 350
check "cetcd stops again" it_cetcd_stop

# etcd on the data dir cetcd wrote (same name and URLs: the same ids)
it_etcd_on_cetcd "$IT_TMP/etcd.log" --snapshot-count 100
check "etcd starts on cetcd's data dir" it_wait_healthy "$IT_CPORT" 30
check "etcd recovered its store from cetcd's .snap" \
	it_log_has "$IT_TMP/etcd.log" "recovered store from snapshot at index $n1\$|\"recovered v2 store from snapshot\",\"snapshot-index\":$n1," 1
check "etcd lists the member from the .snap's v2 store" \
	test "$(ctl member list | grep -c ', started, m1, ')" -eq 1
check "etcd has every key" test "$(keys)" -eq 350
check "etcd takes 300 more puts" puts 351 650
kill -TERM "$IT_ETCD_PID"
it_wait_gone "$IT_ETCD_PID" 15000 || kill -9 "$IT_ETCD_PID"
n2=$(newest "$snapdir")
echo "  etcd's newest .snap is at index $n2"
check "etcd took .snap files of its own" test "$n2" -gt "$((n1 + 250))"

it_cetcd_restart "$IT_TMP/cetcd3.log"
check "cetcd starts on the data dir etcd left" it_wait_healthy "$IT_CPORT" 30
check "from etcd's newest .snap" \
	it_log_has "$IT_CETCD_LOG" "\"msg\":\"recovered v2 store from snapshot\",\"snapshot-index\":$n2," 1
check "with every key of both" test "$(keys)" -eq 650
check "and takes writes" puts 651 660
check "member list names the member" test "$(ctl member list | grep -c ', started, m1, ')" -eq 1
check "cetcd stops" it_cetcd_stop
it_summary
