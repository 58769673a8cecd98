#!/usr/bin/env bash
# --wal-dir, as etcd 3.4's: a member started with a dedicated WAL dir
# (nested, created by the member) writes its WAL segments there and
# nowhere else; its data dir keeps member/snap (the db and the .snap
# files, --snapshot-count 100 makes some) and never gets a member/wal.
# Writers on etcd's Go client put continuously while raftd is SIGKILLed
# twice and then the launcher (every process); every acknowledged put is
# there after each, and after a SIGTERM stop and a start. Debian's etcd
# 3.4, given the same data dir and WAL dir, serves the same puts (when it
# is installed).
# Exits 77 when the programs, etcdctl, python3, curl or Go with Debian's
# clientv3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_build_kvclient
it_init wal-dir

data=$IT_TMP/data
wal=$IT_TMP/disk2/wal/w1
it_cetcd_start w1 "$data" "$IT_TMP/cetcd.log" --wal-dir "$wal" --snapshot-count 100
if ! it_wait_healthy "$IT_CPORT" 30; then
	fail "the member answers"
	tail -20 "$IT_TMP/cetcd.log"
	exit 1
fi
ep=127.0.0.1:$IT_CPORT

# WAL segments (*.wal) anywhere under IT_TMP, relative to it
wal_files() { (cd "$IT_TMP" && find . -name '*.wal' | sed 's#^\./##' | sort); }
# every WAL segment is in the WAL dir, and there is one at least
only_in_wal_dir() {
	local f n=0
	while read -r f; do
		[[ $f == disk2/wal/w1/* ]] || { echo "  a WAL segment outside --wal-dir: $f"; return 1; }
		n=$((n + 1))
	done < <(wal_files)
	((n > 0))
}
check "WAL segments are written in --wal-dir only ($(wal_files | tr '\n' ' '))" only_in_wal_dir
check "the data dir has no member/wal" test ! -e "$data/member/wal"

acks=$IT_TMP/acks
it_kv_start "$IT_TMP/writer.out" write -endpoint "$ep" -prefix kv/w -acks "$acks" -writers 4 -per-conn 2
w=$IT_KV_PID
check "writers get acknowledgements" it_wait_lines "$acks" 200 30
for k in 1 2; do
	check "SIGKILL of raftd ($k): the launcher restarts it and writes flow again" \
		it_kill_child raftd "$acks" 250
done
it_cetcd_kill_restart "$acks" "$w" "$IT_TMP/writer.out" "$IT_TMP/cetcd2.log"
n=$(it_lines "$acks")
check "all $n acknowledged puts survived the kills" it_acked_at "$ep" kv "$acks" "$n"
snaps=$(find "$data/member/snap" -name '*.snap' | wc -l)
check "the member made .snap files in the data dir's member/snap ($snaps)" test "$snaps" -gt 0
check "WAL segments are still in --wal-dir only" only_in_wal_dir
check "the data dir still has no member/wal" test ! -e "$data/member/wal"

st=0
it_cetcd_stop || st=$?
check "SIGTERM stops the member (exit 0)" test "$st" -eq 0
it_cetcd_restart "$IT_TMP/cetcd3.log"
check "it starts again" it_wait_healthy "$IT_CPORT" 30
check "all $n acknowledged puts are there after the stop and start" it_acked_at "$ep" kv "$acks" "$n"
st=0
it_cetcd_stop || st=$?
check "SIGTERM stops it again (exit 0)" test "$st" -eq 0

if command -v etcd >/dev/null; then
	etcd_args=()
	skip=0
	for a in "${IT_CETCD_ARGS[@]}"; do
		if ((skip)); then skip=0; continue; fi
		[[ $a == --runtime-dir ]] && { skip=1; continue; }
		etcd_args+=("$a")
	done
	etcd "${etcd_args[@]}" 2>"$IT_TMP/etcd.log" &
	IT_ETCD_PID=$!
	it_track "$IT_ETCD_PID"
	check "etcd starts on the data dir and WAL dir cetcd wrote" it_wait_healthy "$IT_CPORT" 30
	check "etcd serves all $n acknowledged puts" it_acked_at "$ep" kv "$acks" "$n"
	check "etcd kept the WAL in --wal-dir too" only_in_wal_dir
	kill -TERM "$IT_ETCD_PID"
	it_wait_gone "$IT_ETCD_PID" 15000 || kill -9 "$IT_ETCD_PID"
	wait "$IT_ETCD_PID" 2>/dev/null || true
else
	echo "  etcd is not installed: the comparison with etcd is skipped"
fi
it_summary
