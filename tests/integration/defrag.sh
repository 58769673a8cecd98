#!/usr/bin/env bash
# Maintenance.Defragment on one cetcd member, under load, and killed in
# the middle.
#   1. A db with half its keys deleted and compacted away is defragmented
#      (etcdctl defrag) while a kvclient writer and readers and a latency
#      probe (tests/tools/latprobe: puts and serializable gets, every
#      value checked whole) run: the db shrinks, no reader sees a torn
#      value, no acknowledged put is lost, etcd's log lines are there,
#      requests are answered throughout, and stored's loop is held by the
#      defragmentation for 10 ms of its CPU time at most at a time (its
#      longest copy step and its final step, from its defragmented line),
#      and in the switch to the copy it waits for no disk: the final step
#      waited for no sync, and its time blocked (wall-clock less CPU time
#      less time waiting for a CPU, so what the machine's other load adds
#      is not counted) is under 10 ms; the copy's writeback ran beside its
#      commits and never fell more than 8 MiB and a commit behind; the
#      wall-clock figures and the probe's slowest requests before and
#      during it are printed.
#      Then the replaced file's space goes back to the file system 4 MiB
#      at a time (stored's "gave the replaced db file's space back" line).
#   1b. A snapshot read slowly (tests/tools/snapslow) across another
#      defragmentation holds the old file: its space goes back only after
#      the snapshot is read, and the snapshot is whole.
#   2. Rounds of: a writer runs, a defragmentation starts, and stored,
#      raftd or the launcher is SIGKILLed a random few milliseconds into
#      it; after the restart no acknowledged put is lost, no db.tmp.* is
#      left, and a defragmentation then goes through. Then stored is
#      SIGKILLed as soon as it logs the switch, before the new db's first
#      checkpoint (the file then holds the state sealed before the switch,
#      which raftd's log must continue): no acknowledged put is lost.
#   3. The defragmented file passes bbolt's own check (tests/tools/boltcheck).
# DEFRAG_KILL_ROUNDS sets the rounds of 2 (default 3, one per process; a longer loop by hand:
# DEFRAG_KILL_ROUNDS=100). Exits 77 when programs or tools are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init defrag
it_build_kvclient
it_build_go_tool latprobe go.etcd.io/etcd/clientv3
it_build_go_tool boltcheck go.etcd.io/bbolt
it_build_go_tool snapslow go.etcd.io/etcd/clientv3
LATPROBE=$IT_BUILD/tests/latprobe
BOLTCHECK=$IT_BUILD/tests/boltcheck

ctl() { etcdctl --dial-timeout 2s --command-timeout 30s --endpoints "127.0.0.1:$IT_CPORT" "$@"; }
db=$IT_TMP/m/member/snap/db
it_cetcd_start m "$IT_TMP/m" "$IT_TMP/m.log"
it_wait_healthy "$IT_CPORT"
ep=127.0.0.1:$IT_CPORT

# ---- 1. under load
fill=$IT_TMP/fill.acks
it_kv_start "$IT_TMP/fill.out" write -endpoint "$ep" -prefix fill -acks "$fill" -writers 4 \
	-value-size 2048 -duration 2s
wait "$IT_KV_PID" || true
nfill=$(it_lines "$fill")
ctl del --prefix fill/w000 >/dev/null
ctl del --prefix fill/w001 >/dev/null
rev=$(ctl endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])')
ctl compact "$rev" --physical >/dev/null
size0=$(stat -c %s "$db")
echo "  $nfill keys written, half of them deleted and compacted; the db is $size0 bytes"

acks=$IT_TMP/load.acks
it_kv_start "$IT_TMP/load.out" write -endpoint "$ep" -prefix load -acks "$acks" -writers 2 \
	-readers 2 -value-size 512
kvpid=$IT_KV_PID
"$LATPROBE" -endpoint "$ep" -prefix lat -out "$IT_TMP/lat" >"$IT_TMP/lat.out" 2>&1 &
latpid=$!
it_track "$latpid"
sleep 3
t1=$(it_now_ms)
check "etcdctl defrag answers" ctl defrag
t2=$(it_now_ms)
sleep 1
kill -TERM "$latpid"
latst=0
wait "$latpid" || latst=$?
check "no reader of the probe saw a torn or foreign value" test "$latst" -eq 0
it_kv_show "$IT_TMP/lat.out" '^(bad|error)'
check "kvclient's writer and readers found nothing wrong" it_kv_stop "$kvpid" "$IT_TMP/load.out"
size1=$(stat -c %s "$db")
echo "  defragmented in $((t2 - t1)) ms: $size0 -> $size1 bytes"
# the file grows in steps of up to 16 MiB, and the load goes on writing:
# the db's size (its high-water mark) shrinking is the defragmented
# line's negative current-db-size-bytes-diff, checked below
check "the file did not grow" test "$size1" -le "$size0"
check "stored logged etcd's defragmenting line" it_log_has "$IT_TMP/m.log" '"msg":"defragmenting","path":"[^"]*","current-db-size-bytes":[0-9]+,"current-db-size":"[^"]+","current-db-size-in-use-bytes"' 1
check "and its defragmented line" it_log_has "$IT_TMP/m.log" '"msg":"defragmented","path":"[^"]*","current-db-size-bytes-diff":-[0-9]+,"current-db-size-bytes":[0-9]+,"current-db-size":"[^"]+","current-db-size-in-use-bytes-diff":-?[0-9]+,"current-db-size-in-use-bytes":[0-9]+,"current-db-size-in-use":"[^"]+","took":"' 1
# What a request can wait for the defragmentation is the time stored's
# loop spends in it at once: a copy step, or the final step (the last
# carry-over, the copy's db taken over, the rename, the publication),
# which its defragmented line reports, in wall-clock and in stored's own
# CPU time. The checks are on the CPU time and on the time the final step
# was blocked (in a sync, a lock, a read from the disk): on a shared
# machine the wall-clock time of a step includes the time others ran.
line=$(grep -o '"msg":"defragmented".*' "$IT_TMP/m.log" | head -1)
held() { grep -o "\"$1\":[0-9]*" <<<"$line" | cut -d: -f2; }
echo "  ${line#*\"took\":}"
check "no copy step held stored's loop for 10 ms of its CPU time" \
	test "$(held longest-step-cpu-us || echo 99999999)" -le 10000
check "nor the final step" test "$(held final-step-cpu-us || echo 99999999)" -le 10000
check "the final step waited for no sync of the disk" test "$(held final-step-syncs || echo 1)" -eq 0
check "nor was it blocked for 10 ms" test "$(held final-step-blocked-us || echo 99999999)" -lt 10000
# The copy went to the disk through its own writeback, a chunk at a time,
# with the commits never more than 8 MiB and a commit (about 1.3 MiB of
# pages) ahead of it.
check "the copy's writeback ran beside its commits, at most 8 MiB and a commit behind" \
	test "$(held writeback-ahead-max-bytes || echo 0)" -gt 0 -a \
	"$(held writeback-ahead-max-bytes || echo 99999999)" -le $(((8 + 2) << 20))
# The clients' view, for the record: the slowest request that overlaps
# the defragmentation against the slowest in the 2.5 s before it.
read -r before during n_before n_during < <(awk -v a="$t1" -v b="$t2" '
	{ t = $1; l = $3 }
	t >= a - 2500 && t < a { nb++; if (l > mb) mb = l }
	t * 1000 + l >= a * 1000 && t <= b { nd++; if (l > md) md = l }
	END { printf "%d %d %d %d\n", mb, md, nb, nd }' "$IT_TMP/lat")
echo "  slowest request: $before us in the 2.5 s before ($n_before requests), $during us during ($n_during requests)"
check "requests were answered during the defragmentation" test "$n_during" -gt 0
n=$(it_lines "$acks")
check "no acknowledged put under load is lost ($n)" it_acked_at "$ep" load "$acks" "$n"
# The replaced file's space goes back to the file system a step at a time
# once no reader can read it (at its last close it would all be discarded
# at once on a disk mounted with discard, and the WAL's syncs would wait)
gave='"msg":"gave the replaced db file.s space back","bytes":[0-9]+,"left-bytes":0,"steps":'
check "the replaced file's space went back, 4 MiB at a time" \
	it_wait_log "$IT_TMP/m.log" "$gave"'([2-9]|[1-9][0-9]+),' 10

# ---- 1b. a reader of the old file across the switch: a snapshot read
# slowly (snapslow: 64 KiB every 20 ms) holds its read txn on the file
# the defragmentation replaces; that file's space goes back only once the
# snapshot is read, and the snapshot is whole
slow_st=0
"$IT_BUILD/tests/snapslow" -endpoint "$ep" -out "$IT_TMP/slow.db" -puts 0 -chunk 65536 \
	-delay 20ms >"$IT_TMP/slow.out" 2>"$IT_TMP/slow.err" &
slowpid=$!
it_track "$slowpid"
sleep 1
check "a defragmentation under a slow snapshot reader answers" ctl defrag
check "the switch is made" it_wait_log "$IT_TMP/m.log" '"msg":"defragmented"' 10 2
sleep 2 # far longer than giving back a file nothing holds takes (tens of ms)
check "the snapshot is still being read" kill -0 "$slowpid"
check "and the file it reads is kept meanwhile" test "$(it_count "$IT_TMP/m.log" "$gave")" -eq 1
wait "$slowpid" || slow_st=$?
sed 's/^/    snapslow: /' "$IT_TMP/slow.out" "$IT_TMP/slow.err"
check "the snapshot read across the switch is whole, its checksum matched (exit $slow_st)" \
	test "$slow_st" = 0 -a "$(awk '$1 == "sha" { print $2 }' "$IT_TMP/slow.out")" = ok
check "then the replaced file's space went back" it_wait_log "$IT_TMP/m.log" "$gave" 10 2

# ---- 2. SIGKILL in the middle
# kill_round PREFIX WHAT WHEN: a writer puts PREFIX/..., a defragmentation
# starts, and WHAT (stored, raftd or launcher) is SIGKILLed a random few
# milliseconds into it (WHEN random) or as soon as stored logs the switch
# (WHEN switched); the member is then healthy again. Sets n to the count
# of puts acknowledged (in $IT_TMP/PREFIX.acks).
kill_round() {
	local prefix=$1 what=$2 when=$3 kp dp pid="" switched t0
	it_kv_start "$IT_TMP/$prefix.out" write -endpoint "$ep" -prefix "$prefix" \
		-acks "$IT_TMP/$prefix.acks" -writers 2 -value-size 1024 -duration 1s
	kp=$IT_KV_PID
	sleep 0.3
	switched=$(grep -c '"msg":"defragmented"' "$IT_TMP/m.log" || true)
	[[ $what == launcher ]] || pid=$(it_cetcd_child "$what")
	ctl defrag >/dev/null 2>&1 &
	dp=$!
	if [[ $when == random ]]; then
		sleep "0.0$((RANDOM % 90 + 10))"
	else
		t0=$(it_now_ms)
		while (($(grep -c '"msg":"defragmented"' "$IT_TMP/m.log" || true) == switched)) &&
			(($(it_now_ms) - t0 < 20000)); do :; done
	fi
	if [[ $what == launcher ]]; then
		kill -9 "$IT_CETCD_PID"
		wait "$IT_CETCD_PID" 2>/dev/null || true
		it_until 15000 bash -c "! pgrep -f -- '--data-dir $IT_TMP/m ' >/dev/null" || true
		it_cetcd_restart "$IT_TMP/m.log"
	else
		[[ -n $pid ]] && kill -9 "$pid"
	fi
	wait "$dp" 2>/dev/null || true
	it_wait_healthy "$IT_CPORT"
	kill -TERM "$kp" 2>/dev/null || true
	wait "$kp" 2>/dev/null || true
	n=$(it_lines "$IT_TMP/$prefix.acks")
}
rounds=${DEFRAG_KILL_ROUNDS:-3}
whats=(stored raftd launcher)
for ((i = 0; i < rounds; i++)); do
	what=${whats[i % 3]}
	kill_round "kill$i" "$what" random
	check "round $i: SIGKILL of $what mid-defragmentation lost none of $n acknowledged puts" \
		it_acked_at "$ep" "kill$i" "$IT_TMP/kill$i.acks" "$n"
	check "round $i: a defragmentation goes through after it" ctl defrag
	check "round $i: no db.tmp.* is left" test -z "$(ls "$IT_TMP/m/member/snap" | grep '^db\.tmp\.' || true)"
done
# right after the switch: the renamed copy holds, durably, only what it
# held when it was sealed; the rest comes again from raftd's log
kill_round after stored switched
check "stored SIGKILLed right after the switch lost none of $n acknowledged puts" \
	it_acked_at "$ep" after "$IT_TMP/after.acks" "$n"
n=$(it_lines "$acks")
check "the puts under load are all still there" it_acked_at "$ep" load "$acks" "$n"

# ---- 3. bbolt's check of the defragmented file
it_cetcd_stop || true
check "bbolt's check passes on the defragmented db" "$BOLTCHECK" "$db"
it_summary
