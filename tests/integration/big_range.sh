#!/usr/bin/env bash
# A Range whose answer is large (100,000 keys of 1 KiB: about 105 MB) is
# streamed from one read txn as the client reads it, so the gatewayd
# holds far less than the answer (tests/tools/bigrange loads and checks).
#  1. etcdctl gets every key and value (checked against what was loaded,
#     byte for byte), the keys alone, and the count.
#  2. bigrange gets the answer at full speed and through a socket read at
#     20 MB/s, keys_only and count_only too; every key and value checked.
#  3. The gatewayd's peak resident memory (VmHWM, reset before each get
#     through /proc/PID/clear_refs) grows by less than a quarter of the
#     answer, and a Range being streamed holds a second mapping of the db
#     (the job's read txn).
#  4. Three slow readers at once all get their answers, while at most two
#     Ranges hold a read txn (a reader entry) at a time. A client that
#     stops reading and is killed, and a Range whose deadline passes, give
#     their read txn back at once: the second mapping goes.
#  5. stored SIGKILLed while a slow reader's Range is being streamed, then
#     keys it has not reached yet written again: the answer comes whole and
#     as it began. A writer that overwrites and adds keys
#     of the range while a slow reader is half way through does not change
#     the answer: every key as loaded, at a header revision below the
#     writes'.
# Exits 77 when the programs, etcdctl, python3, curl or Go with Debian's
# etcd packages are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_build_go_tool bigrange go.etcd.io/etcd/etcdserver/etcdserverpb
BR=$IT_BUILD/tests/bigrange
it_init big-range

N=100000
SIZE=1024
# loaded in txns of 1,000 puts (about 1.05 MB, under --max-request-bytes)
it_cetcd_start b1 "$IT_TMP/data" "$IT_TMP/cetcd.log" --gateways 1 --max-txn-ops 1000
if ! it_wait_healthy "$IT_CPORT" 30; then
	fail "the member answers"
	tail -20 "$IT_TMP/cetcd.log"
	exit 1
fi
ep=127.0.0.1:$IT_CPORT
args=(-endpoint "$ep" -prefix big -n $N -size $SIZE)
ctl() { etcdctl --endpoints "$ep" --command-timeout 60s "$@"; }

check "$N keys of $SIZE bytes are loaded" "$BR" load "${args[@]}"
gw=$(it_cetcd_child gatewayd-0)

# kib FIELD: a VmHWM/VmRSS figure of the gatewayd, in KiB.
kib() { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$gw/status"; }
# peak_reset: the peak drops to the current RSS (proc(5), clear_refs 5).
peak_reset() { echo 5 >"/proc/$gw/clear_refs"; }
# db_maps: the gatewayd's mappings of the db file.
db_maps() { grep -c '/member/snap/db$' "/proc/$gw/maps" || true; }
maps_are() { test "$(db_maps)" = "$1"; }
# growth_ok WHAT: the peak grew by less than a quarter of the answer
# since the last peak_reset (rss_before).
growth_ok() {
	local grew=$(($(kib VmHWM) - rss_before))
	echo "  $1: the gatewayd's peak RSS grew by $grew KiB (answer: ~$((N * (SIZE + 26) / 1024)) KiB)"
	((grew < N * SIZE / 1024 / 4))
}
peak_reset
check "the gatewayd's peak can be reset (clear_refs)" test "$(kib VmHWM)" -le $(($(kib VmRSS) + 1024))

# 1. etcdctl
want=$(awk -v n=$N -v s=$SIZE 'BEGIN { for (i = 0; i < n; i++) printf "big/%08d\n%0*d\n", i, s, i }' | sha256sum)
peak_reset
rss_before=$(kib VmRSS)
got=$(ctl get big/ --prefix | sha256sum)
check "etcdctl get --prefix gives every key and value as loaded" test "$got" = "$want"
check "and the gatewayd's peak grew by less than a quarter of the answer" growth_ok "etcdctl get"
want=$(awk -v n=$N 'BEGIN { for (i = 0; i < n; i++) printf "big/%08d\n\n", i }' | sha256sum)
check "etcdctl get --prefix --keys-only gives every key" test "$(ctl get big/ --prefix --keys-only | sha256sum)" = "$want"
check "etcdctl get --prefix --limit 1 counts them all" \
	test "$(ctl get big/ --prefix --limit 1 -w fields | awk '$1 == "\"Count\"" { print $3 }')" = $N

# 2. bigrange, fast and slow, with the second mapping seen while it runs
for mode in "" "-serializable" "-keys-only" "-count-only"; do
	check "bigrange get $mode: every key and value" "$BR" get "${args[@]}" $mode
done
peak_reset
rss_before=$(kib VmRSS)
"$BR" get "${args[@]}" -rate 20000000 >"$IT_TMP/slow.out" 2>&1 &
slow=$!
it_track $slow
check "a Range being streamed holds a read txn of its own (a second db mapping)" \
	it_until 10000 maps_are 2
check "the slow reader (20 MB/s) gets every key and value" wait $slow
cat "$IT_TMP/slow.out"
check "and the gatewayd's peak grew by less than a quarter of the answer" growth_ok "20 MB/s reader"
check "the job's mapping is gone once the answer is sent" it_until 5000 maps_are 1

# 4. three slow readers at once: two hold a read txn, the third waits its
# turn
pids=()
for i in 1 2 3; do
	it_bg "$IT_TMP/three.$i.out" "$BR" get "${args[@]}" -rate 40000000
	pids+=("$IT_BG_PID")
done
most=0
while kill -0 "${pids[@]}" 2>/dev/null; do
	m=$(db_maps)
	((m > most)) && most=$m
	sleep 0.05
done
for i in 0 1 2; do
	check "reader $((i + 1)) of three at once gets every key and value" wait "${pids[i]}"
done
check "at most two of them held a read txn at once (the gatewayd's mappings: $most)" test "$most" -le 3

# a client that stops reading and is killed; a deadline
"$BR" get "${args[@]}" -stop-after $((8 << 20)) >"$IT_TMP/stop.out" 2>&1 &
stopper=$!
it_track $stopper
check "a client stops reading after 8 MiB" it_until 20000 grep -q stopping "$IT_TMP/stop.out"
check "its Range still holds its read txn" maps_are 2
kill -9 $stopper
check "killed, its read txn goes at once" it_until 2000 maps_are 1
"$BR" get "${args[@]}" -rate 1000000 -timeout 3s >"$IT_TMP/deadline.out" 2>&1 &
late=$!
it_track $late
check "a Range with a deadline that a slow reader misses is streamed" it_until 2000 maps_are 2
check "its deadline passes: DeadlineExceeded" it_until 10000 grep -q DeadlineExceeded "$IT_TMP/deadline.out"
check "and its read txn goes" it_until 2000 maps_are 1
wait $late || true

# stored SIGKILLed under a Range being streamed, then keys the Range has
# not reached yet rewritten: its read txn is registered in the region, so
# neither stored reuses a page it reads (invariants 3 and 4,
# docs/invariants.md), and its answer is whole and as it was (version 1)
kargs=(-endpoint "$ep" -prefix kil -n 20000 -size $SIZE)
check "20,000 more keys are loaded" "$BR" load "${kargs[@]}"
"$BR" get "${kargs[@]}" -rate 4000000 >"$IT_TMP/kill.out" 2>&1 &
reader=$!
it_track $reader
check "a slow Range of them is being streamed" it_until 10000 maps_are 2
old_stored=$(it_cetcd_child stored)
kill -9 "$old_stored"
check "stored, SIGKILLed, is started again" it_wait_child stored "$old_stored" 30
check "its last 5,000 keys are written again" "$BR" load "${kargs[@]}" -from 15000
check "the Range streamed across both gets every key and value as it began" wait $reader
cat "$IT_TMP/kill.out"

# 5. writes during a slow Range
check "a writer during a slow Range changes nothing of its answer (one revision)" \
	"$BR" get "${args[@]}" -rate 20000000 -write-during 50
check "the writes are there afterwards" test "$(ctl get big/00000000 --print-value-only)" = changed

check "the member logged no error" test "$(it_count "$IT_TMP/cetcd.log" '"level":"error"')" = 0
it_summary
