#!/usr/bin/env bash
# The fault suite's workload tool, tests/tools/faultload, shown able to
# fail: its Go tests (simulated correct histories of each workload pass,
# the same with an anomaly put in do not), then `faultload -check` on
# the crafted histories of tests/fault/testdata (each directory's expect
# file names the exit status and the summary fields it must print; register: a clean
# history, a stale read, a lost write, a read of a value never written,
# a cas that applied against the wrong value, a read of a value whose
# write failed; txn: a clean history, a stale read, a lost txn; watch: a
# clean history with a cancellation for compaction, a gap; lock: a clean
# history where a lease stopped being kept alive before its unlock, two
# holders at once, a Lock RPC holder overlapping a Mutex holder whose
# key vanished; lease: a clean history, a key deleted while its lease
# was surely alive, a lease renewed after its keys were deleted, a
# lapsed lease's key left), a search too big
# for its step bound (unknown, not clean), a history that is not one
# (exit 2); then a short run of each workload against a 3-member cetcd
# cluster, which must check clean (lock: holders through the Lock RPC
# and through concurrency.Mutex both took it).
# Exits 77 when Go or etcd's client packages are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_init faultload_check
it_build_go_tool faultload go.etcd.io/etcd/clientv3
FL=$IT_BUILD/tests/faultload
DATA=$IT_SRC/tests/fault/testdata

if (cd "$IT_SRC/tests/tools/faultload" &&
	GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$IT_BUILD/tests/gocache GOFLAGS='' \
		go test . >"$IT_TMP/gotest.out" 2>&1); then
	ok "faultload's Go tests pass"
else
	fail "faultload's Go tests pass"
	sed 's/^/  /' "$IT_TMP/gotest.out"
fi

# summary_has LINE FIELDS: every key=value of FIELDS is in LINE.
summary_has() {
	local kv
	for kv in $2; do
		[[ " $1 " == *" $kv "* ]] || return 1
	done
}

n=0
for dir in "$DATA"/*/; do
	name=$(basename "$dir")
	[[ -f $dir/expect ]] || continue
	n=$((n + 1))
	work=$IT_TMP/$name
	cp -r "$dir" "$work"
	want=$(cat "$work/expect")
	rc=0
	line=$("$FL" -check "$work" 2>"$work/stderr") || rc=$?
	echo "  $name: $line (exit $rc)"
	want_rc=${want%% *}
	want_rc=${want_rc#exit=}
	if [[ $rc == "$want_rc" ]] && summary_has "$line" "${want#* }"; then
		ok "$name: $want"
	else
		fail "$name: $want"
		sed 's/^/    /' "$work"/*.anomalies "$work/stderr"
	fi
	if ((want_rc == 1)) && ! [[ -s $(echo "$work"/*.anomalies) ]]; then
		fail "$name: the anomalies file says what was found"
	fi
done
check "crafted histories were checked" test "$n" -ge 18

# A long sequential history the search cannot finish in 1 step.
mkdir -p "$IT_TMP/big"
for i in $(seq 1 2000); do
	printf '{"proc":0,"f":"write","call_ns":%d,"ret_ns":%d,"type":"ok","ep":"e","client":0,"key":"k","value":"v%d"}\n' \
		$((i * 10)) $((i * 10 + 5)) "$i"
done >"$IT_TMP/big/register.jsonl"
rc=0
line=$("$FL" -check "$IT_TMP/big" -check-steps 1 2>/dev/null) || rc=$?
check "a search over its step bound is unknown, not clean or anomalous ($line)" \
	eval '[[ $rc == 0 ]] && summary_has "$line" "unknown=1 anomalies=0" && grep -q "^unknown: key k" "$IT_TMP/big/register.anomalies"'
rc=0
line=$("$FL" -check "$IT_TMP/big" 2>/dev/null) || rc=$?
check "the same history within its bounds is clean ($line)" \
	eval '[[ $rc == 0 ]] && summary_has "$line" "unknown=0 anomalies=0 ok=2000"'

mkdir -p "$IT_TMP/garbage"
echo '{"proc":0,"f":"read","type":"ok"' >"$IT_TMP/garbage/register.jsonl"
rc=0
"$FL" -check "$IT_TMP/garbage" >"$IT_TMP/garbage.out" 2>&1 || rc=$?
check "a history that is not JSON is a usage error (exit 2), said so" \
	eval '[[ $rc == 2 ]] && grep -q "register.jsonl:1" "$IT_TMP/garbage.out"'

# A short run on a real cluster.
it_cl_init faultload 3
for i in 0 1 2; do it_cl_start "$i" cetcd; done
for i in 0 1 2; do it_cl_answers "$i" || true; done
eps=http://$(it_cl_ep 0),http://$(it_cl_ep 1),http://$(it_cl_ep 2)
for w in register txn watch lock lease; do
	rc=0
	line=$("$FL" -endpoints "$eps" -workload $w -seed 1 -duration 4s \
		-out "$IT_TMP/run" -serializable 0.2 2>"$IT_TMP/run.err") || rc=$?
	echo "  $line"
	sed 's/^/  /' "$IT_TMP/run.err"
	check "a $w run on 3 cetcd members checks clean" \
		eval '[[ $rc == 0 ]] && summary_has "$line" "workload=$w anomalies=0 lost=0 unknown=0"'
	min=50
	[[ $w == lease ]] && min=20 # its clients mostly wait on TTLs
	check "it did some work" eval '[[ $(sed -n "s/.* ok=\([0-9]*\) .*/\1/p" <<<"$line") -ge $min ]]'
done
check "Lock RPC holders and Mutex holders both took the lock" \
	eval 'grep "\"f\":\"lock\".*\"type\":\"ok\".*\"rpc\":true" "$IT_TMP/run/lock.jsonl" >/dev/null &&
		grep "\"f\":\"lock\".*\"type\":\"ok\"" "$IT_TMP/run/lock.jsonl" | grep -v "\"rpc\":true" >/dev/null'
check "the lease run let leases lapse and saw their keys deleted" \
	eval 'grep "\"type\":\"delete\"" "$IT_TMP/run/lease.jsonl" >/dev/null'
it_summary
