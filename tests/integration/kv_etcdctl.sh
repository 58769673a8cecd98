#!/usr/bin/env bash
# etcdctl 3.4 against a cetcd member and against Debian's etcd 3.4, both
# started fresh with the same flags: the same commands go to both, in the
# same order, and what etcdctl prints (stdout, stderr) and its exit code
# must be the same once what has to differ is normalised: member and
# cluster ids, ports, timestamps, raft term and index, db size, the etcd
# patch version (3.4.x) and the time endpoint health took. Revisions are
# not normalised: both start at revision 1 and take the same writes.
#
# Covered: put (--prev-kv, --ignore-value, --ignore-lease, a lease that
# does not exist, a value from stdin, one over --max-request-bytes), get
# (prefix, --from-key, a range end, --limit, every --sort-by and --order,
# --rev, --keys-only, --count-only, --print-value-only, serializable,
# --hex, compacted and future revisions, in simple, json and fields
# form), del (prefix, --from-key, a range, --prev-kv), txn fed on stdin
# (interactive and not: compares on value, version, create and mod
# revision, success and failure branches, more than --max-txn-ops
# operations), compaction (and --physical; then reads of compacted
# revisions), endpoint status and health, member list.
# Exits 77 when etcd, etcdctl 3.4, python3 or the programs are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_need_program jq "Debian package jq"
it_init kv-etcdctl

it_cetcd_start t1 "$IT_TMP/cetcd.data" "$IT_TMP/cetcd.log" --gateways 2
it_etcd_start t1 "$IT_TMP/etcd.data" "$IT_TMP/etcd.log"
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30
check "Debian's etcd answers" it_wait_healthy "$IT_ETCD_PORT" 30
((it_failures == 0)) || {
	tail -20 "$IT_TMP/cetcd.log"
	it_summary
	exit 1
}

# The ids and ports of each side, to normalise them away.
declare -A port pport member cluster
port[cetcd]=$IT_CPORT
pport[cetcd]=$IT_PPORT
port[etcd]=$IT_ETCD_PORT
pport[etcd]=$IT_ETCD_PPORT
for side in cetcd etcd; do
	st=$(etcdctl --endpoints "127.0.0.1:${port[$side]}" endpoint status -w json)
	# (not through jq: it reads numbers as doubles)
	member[$side]=$(grep -oE '"member_id":[0-9]+' <<<"$st" | head -1 | cut -d: -f2)
	cluster[$side]=$(grep -oE '"cluster_id":[0-9]+' <<<"$st" | head -1 | cut -d: -f2)
done
echo "  cetcd on :${port[cetcd]} (member ${member[cetcd]}), etcd on :${port[etcd]} (member ${member[etcd]})"

# normalise SIDE: stdin to stdout with SIDE's ids, ports and the values
# that differ between two servers replaced by names.
normalise() {
	local s=$1
	sed -E \
		-e "s/${member[$s]}/MEMBER/g; s/$(printf '%x' "${member[$s]}")/MEMBER/g" \
		-e "s/${cluster[$s]}/CLUSTER/g; s/$(printf '%x' "${cluster[$s]}")/CLUSTER/g" \
		-e "s/127\.0\.0\.1:${port[$s]}/127.0.0.1:CPORT/g; s/127\.0\.0\.1:${pport[$s]}/127.0.0.1:PPORT/g" \
		-e 's/"ts":"[^"]*"/"ts":"TS"/g; s/"target":"[^"]*"/"target":"T"/g' \
		-e 's/("raft_term"|"raftTerm"|"raftIndex"|"raftAppliedIndex"|"dbSize"|"dbSizeInUse"):[0-9]+/\1:N/g' \
		-e 's/"RaftTerm" : [0-9]+/"RaftTerm" : N/g' \
		-e 's/(")?3\.4\.[0-9]+(")?/\13.4.x\2/g' \
		-e 's/took = [0-9.]+[µnm]?s/took = T/g' \
		-e 's/[0-9.]+ [kMG]?B/DBSIZE/g' \
		-e '/^[|+]/ { s/ +/ /g; s/-+/-/g }' \
		-e 's/^(\| 127\.0\.0\.1:CPORT \| MEMBER \| 3\.4\.x \| DBSIZE \| [a-z]+ \| [a-z]+ \| )[0-9]+ \| [0-9]+ \| [0-9]+ \|/\1N | N | N |/' \
		-e 's/^(127\.0\.0\.1:CPORT, MEMBER, 3\.4\.x, DBSIZE, [a-z]+, [a-z]+), [0-9]+, [0-9]+, [0-9]+,/\1, N, N, N,/'
}

# same WHAT [--stdin FILE] ARGS...: etcdctl ARGS against both; stdout,
# stderr and exit code must match after normalising, and neither may have
# failed to reach its member.
d=$IT_TMP/cmp
mkdir -p "$d"
n=0
same() {
	local what=$1 in=/dev/null side rc
	shift
	if [[ $1 == --stdin ]]; then
		in=$2
		shift 2
	fi
	n=$((n + 1))
	echo "$what: etcdctl $*" >"$d/$n.cmd"
	for side in cetcd etcd; do
		rc=0
		timeout 30 etcdctl --endpoints "127.0.0.1:${port[$side]}" "$@" <"$in" \
			>"$d/$n.$side.out" 2>"$d/$n.$side.err" || rc=$?
		{
			cat "$d/$n.$side.out"
			echo "--- stderr"
			cat "$d/$n.$side.err"
			echo "--- exit code $rc"
		} | normalise "$side" >"$d/$n.$side"
	done
	# (two members that do not answer fail alike: that is no agreement)
	if grep -qE 'context deadline exceeded|connection refused|code = Unavailable' \
		"$d/$n.cetcd.err" "$d/$n.etcd.err"; then
		fail "$what: a member did not answer: etcdctl $*"
		tail -n 3 "$d/$n.cetcd.err" "$d/$n.etcd.err" | sed 's/^/    /'
	elif cmp -s "$d/$n.cetcd" "$d/$n.etcd"; then
		ok "$what"
	else
		fail "$what: etcdctl $*"
		diff -u --label etcd "$d/$n.etcd" --label cetcd "$d/$n.cetcd" | head -30 | sed 's/^/    /' || true
	fi
}

# txn_input FILE LINES...: a txn's stdin, one argument per line.
txn_input() {
	local f=$1
	shift
	printf '%s\n' "$@" >"$f"
}

# ------------------------------------------------------------------ put
for kv in "foo bar" "foo1 bar1" "foo2 bar2" "foo3 bar3" "zoo val" "zoo1 val1" "a 1" "b 2" "c 3"; do
	# shellcheck disable=SC2086
	same "put $kv" put $kv
done
same "put --prev-kv prints the previous pair" put --prev-kv foo bar-new
same "put --prev-kv -w json" put --prev-kv -w json foo1 bar1-new
same "put --prev-kv of a new key" put --prev-kv newkey v
same "put --ignore-value keeps the value" put --ignore-value foo
same "put --ignore-value of a missing key: key not found" put --ignore-value nokey
same "put --ignore-value with a value given" put --ignore-value foo2 something
same "put --lease of a lease that does not exist: lease not found" put --lease=1234 k v
same "put --lease that is not hex" put --lease=zz k v
same "put --ignore-lease of a key without a lease" put --ignore-lease foo3 bar3-new
same "put --ignore-lease of a missing key" put --ignore-lease nokey2 v
same "put of an empty value" put emptyval ""
printf 'from stdin' >"$IT_TMP/value.in"
same "put of a value read from stdin" --stdin "$IT_TMP/value.in" put stdinkey
head -c $((1536 * 1024 + 100)) /dev/zero | tr '\0' x >"$IT_TMP/big.in"
same "put over --max-request-bytes: request is too large" --stdin "$IT_TMP/big.in" put bigkey
same "put -w json" put -w json a 10
same "put -w fields" put -w fields b 20
same "put without arguments" put
same "put of an empty key" put "" v

# ------------------------------------------------------------------ get
same "get" get foo
same "get -w json (revisions, version, base64)" get -w json foo
same "get -w fields" get -w fields foo
same "get --prefix" get --prefix foo
same "get --prefix -w json" get --prefix -w json foo
same "get --from-key" get --from-key foo1
same "get KEY RANGE_END" get foo foo3
same "get KEY RANGE_END -w json" get -w json foo foo3
same "get --limit (more, count)" get --prefix --limit 2 -w json foo
same "get --limit simple" get --prefix --limit 2 foo
for by in KEY CREATE MODIFY VERSION VALUE; do
	for order in ASCEND DESCEND; do
		same "get --sort-by=$by --order=$order" get --prefix --sort-by=$by --order=$order foo
	done
done
same "get --order=DESCEND alone (by key)" get --prefix --order=DESCEND -w json foo
same "get --sort-by of an unknown target" get --prefix --sort-by=BOGUS foo
same "get --rev" get --rev=3 foo
same "get --rev -w json" get --rev=4 --prefix -w json foo
same "get --rev before the key existed" get --rev=1 foo
same "get --rev of a future revision" get --rev=99999 foo
same "get --keys-only" get --prefix --keys-only foo
same "get --keys-only -w json" get --prefix --keys-only -w json foo
same "get --count-only" get --prefix --count-only foo
same "get --print-value-only" get --prefix --print-value-only foo
same "get --consistency=s" get --consistency=s --prefix -w json foo
same "get of a missing key" get nosuchkey
same "get of a missing key -w json" get -w json nosuchkey
same "get --prefix '' (every key)" get --prefix -w json ""
same "get --from-key '' --limit 3" get --from-key --limit 3 ""
same "get --hex" get --hex --prefix zoo
same "get of the empty value" get -w json emptyval
same "get without a key" get
same "get of an empty key" get ""
same "get --rev, --sort-by, --order and --limit together" \
	get --prefix --rev=12 --sort-by=MODIFY --order=DESCEND --limit 2 -w json foo
same "get --keys-only --limit --from-key" get --keys-only --limit 3 --from-key b

# ------------------------------------------------------------------ del
same "del" del foo1
same "del --prev-kv" del --prev-kv foo2
same "del --prev-kv -w json" del --prev-kv -w json foo3
same "del --prefix" del --prefix zoo
same "del of a missing key" del nosuchkey
same "del of an empty key" del ""
same "del KEY RANGE_END" del a c
same "del -w json --prefix" del -w json --prefix new
same "get after the deletes" get --from-key -w json ""
same "del --from-key" del --prev-kv --from-key stdin

# ------------------------------------------------------------------ txn
txn_input "$IT_TMP/txn1" 'value("foo") = "bar-new"' '' 'put txnkey ok' 'get foo' '' 'put txnkey fail' ''
same "txn -i, success branch" --stdin "$IT_TMP/txn1" txn -i
txn_input "$IT_TMP/txn2" 'value("foo") = "nope"' '' 'put txnkey ok2' '' 'put txnkey failed' 'get txnkey' ''
same "txn -i, failure branch" --stdin "$IT_TMP/txn2" txn -i
txn_input "$IT_TMP/txn3" 'mod("foo") > "0"' 'version("foo") = "3"' 'create("foo") < "100"' '' \
	'del --prefix txn' 'get --prefix f' '' 'put never here' ''
same "txn -i -w json, several compares, delete and range" --stdin "$IT_TMP/txn3" txn -i -w json
txn_input "$IT_TMP/txn4" 'version("nosuchkey") = "0"' '' 'put t4 yes' '' ''
same "txn (not interactive) on a missing key's version" --stdin "$IT_TMP/txn4" txn
txn_input "$IT_TMP/txn5" 'mod("foo") < "2"' '' '' 'put t5 failure-branch' ''
same "txn -w json, failure branch" --stdin "$IT_TMP/txn5" txn -w json
txn_input "$IT_TMP/txn6" '' 'put t6 a' 'put t6b b' '' ''
same "txn without compares" --stdin "$IT_TMP/txn6" txn
{
	echo
	for i in $(seq 129); do echo "put many$i v"; done
	echo
	echo
} >"$IT_TMP/txn7"
same "txn over --max-txn-ops: too many operations" --stdin "$IT_TMP/txn7" txn
txn_input "$IT_TMP/txn8" 'value("foo") > "bar-a"' 'mod("foo") != "3"' 'value("c") < "4"' '' 'get foo' '' 'get c' ''
same "txn comparing value greater and less, mod not equal" --stdin "$IT_TMP/txn8" txn -w json
txn_input "$IT_TMP/txn9" '' 'put dup 1' 'put dup 2' '' ''
same "txn putting one key twice: duplicate key" --stdin "$IT_TMP/txn9" txn

# ------------------------------------------------------------------ compaction
rev=$(etcdctl --endpoints "127.0.0.1:${port[cetcd]}" get -w json x | jq .header.revision)
erev=$(etcdctl --endpoints "127.0.0.1:${port[etcd]}" get -w json x | jq .header.revision)
check "both are at the same revision ($rev, $erev)" test "$rev" = "$erev"
same "compaction" compaction 5
same "compaction again: required revision has been compacted" compaction 5
same "compaction below the compacted revision" compaction 3
same "get --rev of a compacted revision" get --rev=4 foo
same "get --rev at the compacted revision" get --rev=5 -w json --prefix foo
same "compaction --physical" compaction --physical 8
same "get --rev of a revision compacted physically" get --rev=7 --prefix foo
same "get --rev after it" get --rev=9 --prefix -w json ""
same "compaction of a future revision" compaction 99999
same "compaction of the current revision" compaction "$rev"
same "get after compacting everything" get --from-key -w json ""
same "compaction without a revision" compaction

# ------------------------------------------------------------------ status, health, members
same "endpoint status -w json" endpoint status -w json
for side in cetcd etcd; do
	etcdctl --endpoints "127.0.0.1:${port[$side]}" endpoint status -w json >"$d/status.$side"
done
status_fields() { jq -c '.[0].Status | [paths | map(tostring) | join(".")] | sort' "$1"; }
check "endpoint status has etcd's fields" test "$(status_fields "$d/status.cetcd")" = "$(status_fields "$d/status.etcd")"
check "and cetcd's version is 3.4.x" jq -e >/dev/null '.[0].Status.version | test("^3\\.4\\.[0-9]+$")' "$d/status.cetcd"
check "cetcd leads (leader = its member id)" \
	jq -e >/dev/null '.[0].Status.leader == .[0].Status.header.member_id and .[0].Status.raftIndex >= .[0].Status.raftAppliedIndex and .[0].Status.raftAppliedIndex > 0 and .[0].Status.dbSize >= .[0].Status.dbSizeInUse and .[0].Status.dbSizeInUse > 0' \
	"$d/status.cetcd"
check "header revision is the store's" test "$(jq '.[0].Status.header.revision' "$d/status.cetcd")" = "$rev"
same "endpoint status" endpoint status
same "endpoint status -w table" endpoint status -w table
same "endpoint health" endpoint health
same "member list" member list
same "member list -w json" member list -w json
same "member list -w table" member list -w table

it_summary
