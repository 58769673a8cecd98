#!/usr/bin/env bash
# Keys longer than a bbolt key (32 KiB), against Debian's etcd 3.4: a fresh
# cetcd and a fresh etcd, side by side, take the same etcdctl commands:
# puts of a 100,000-byte key and of 40,001-byte keys that share their first
# 40,000 bytes (and overwrites, a delete), beside short keys sorting among
# them; gets of each, of prefixes, ranges and from-key (keys only, counts,
# limits, sorted both ways), at the current revision and at old ones; a txn
# comparing a long key's value; a lease attached to a long key, revoked;
# watches replaying the events; a compaction. Both must print
# the same, and give the same HashKV at every revision left. A txn of 17
# 100,000-byte keys is over the request limit (--max-request-bytes, 1.5 MiB)
# and must be refused by both with etcd's "etcdserver: request is too
# large". Then cetcd defragments its db and still answers the same; the
# db passes bbolt's check (tests/tools/boltcheck), cetcd reopens it and
# answers the same; cetcd started on etcd's data dir (its index rebuilt
# from the db etcd wrote) answers as etcd did; and etcd restored from
# cetcd's snapshot (etcdctl snapshot save, restore) answers the same.
# Exits 77 when etcd, etcdctl, python3 or Go is missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcd
it_need_etcdctl
it_need_program python3 "Debian package python3"
it_init long-key
it_build_go_tool boltcheck go.etcd.io/bbolt
BOLTCHECK=$IT_BUILD/tests/boltcheck

it_cetcd_start lk "$IT_TMP/cetcd.data" "$IT_TMP/cetcd.log"
it_etcd_start lk "$IT_TMP/etcd.data" "$IT_TMP/etcd.log"
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30
check "Debian's etcd answers" it_wait_healthy "$IT_ETCD_PORT" 30

big=$(printf 'k%.0s' $(seq 100000))          # 100,000 bytes
stem=$(printf 'L%.0s' $(seq 40000))          # 40,000 bytes
eps=("127.0.0.1:$IT_CPORT" "127.0.0.1:$IT_ETCD_PORT")

# ctl PORT ARGS...: etcdctl against the member on PORT; what it prints, and
# its error text without the timestamp.
ctl() {
	local port=$1
	shift
	{ etcdctl --endpoints "127.0.0.1:$port" --command-timeout=20s "$@" 2>&1 || true; } |
		sed 's/^{"level".*"error":"\(.*\)"}$/error: \1/; s/^[0-9/]* [0-9:.]* //'
}

# show: the keys, as their length and first and last bytes (a 100 KB key
# printed whole makes a diff unreadable).
show() {
	awk '{ if (length($0) > 40) print length($0), substr($0, 1, 6), substr($0, length($0) - 5)
	       else print }'
}

# writes PORT: the same commands for both members (lines "> what").
writes() {
	local p=$1 id
	echo "> put big"; ctl "$p" put "$big" v1
	echo "> put stem+b, stem+a, stem, stem+a again"
	ctl "$p" put "${stem}b" b1
	ctl "$p" put "${stem}a" a1
	ctl "$p" put "$stem" s1
	ctl "$p" put "${stem}a" a2
	echo "> put short keys around them"
	ctl "$p" put L short-L
	ctl "$p" put LM short-LM
	ctl "$p" put M short-M
	echo "> put big again, del stem+b"
	ctl "$p" put "$big" v2
	ctl "$p" del "${stem}b"
	echo "> txn on big's value"
	printf 'value("%s") = "v2"\n\nput %sc c1\n\nput never x\n\n' "$big" "$stem" | ctl "$p" txn
	echo "> over the request limit: a txn of 17 keys of 100,000 bytes"
	for i in $(seq 10 26); do printf 'put %s%s x\n' "$big" "$i"; done |
		{ printf '\n'; cat; printf '\n\n'; } | ctl "$p" txn
}

# reads PORT [REV]: gets of every kind (at REV when given).
reads() {
	local p=$1 rev=()
	[[ -n ${2:-} ]] && rev=(--rev "$2")
	local k
	for k in "$big" "${stem}a" "${stem}b" "${stem}c" "${stem}d" "$stem" L; do
		echo "> get one key of ${#k} bytes"
		ctl "$p" get "${rev[@]}" "$k" | show
	done
	echo "> get --prefix stem"; ctl "$p" get "${rev[@]}" --prefix "$stem" | show
	echo "> get --prefix L, keys only"; ctl "$p" get "${rev[@]}" --prefix --keys-only L | show
	echo "> get --from-key L, descending"; ctl "$p" get "${rev[@]}" --from-key L \
		--sort-by=KEY --order=DESCEND | show
	echo "> get [stem+a, M), limit 3"; ctl "$p" get "${rev[@]}" --limit 3 "${stem}a" M | show
	echo "> get [L, stem+b), count"; ctl "$p" get "${rev[@]}" --keys-only -w json "L" "${stem}b" |
		grep -o '"count":[0-9]*'
	echo "> get [stem+a, big) by version"; ctl "$p" get "${rev[@]}" --sort-by=VERSION "${stem}a" "$big" | show
}

it_same_on_both writes
rev=$(etcdctl --endpoints "${eps[0]}" get x -w json | grep -o '"revision":[0-9]*' | cut -d: -f2)
echo "revision $rev"
grep -q 'request is too large' "$IT_TMP/cetcd.out" &&
	ok "cetcd refuses the txn over the request limit with etcd's text" ||
	fail "cetcd refuses the txn over the request limit with etcd's text"

latest_reads() { reads "$1"; }
grep -q 'request is too large' "$IT_TMP/etcd.out" ||
	fail "etcd refuses the txn over the request limit with that text"
echo "reads at the current revision"
it_same_on_both latest_reads
for r in 4 9 11; do
	old_reads() { reads "$1" "$r"; }
	echo "reads at revision $r"
	it_same_on_both old_reads
done
cp "$IT_TMP/cetcd.out" "$IT_TMP/at11.cetcd"

watch_all() {
	echo "> watch --rev 1 --prefix ''"
	{ timeout 3 etcdctl --endpoints "127.0.0.1:$1" watch --rev 1 --prefix '' || true; } | show
}
it_same_on_both watch_all

# same_hashkv REV: both answer HashKV at REV with the same hash.
hashkv_at() {
	etcdctl --endpoints "$1" --command-timeout=30s endpoint hashkv --rev "$2" -w json |
		grep -o '"revision":[0-9]*\|"hash":[0-9]*' | tr '\n' ' '
}
same_hashkv_all() {
	local r a b bad=0
	for ((r = $1; r <= rev; r++)); do
		a=$(hashkv_at "${eps[0]}" "$r")
		b=$(hashkv_at "${eps[1]}" "$r")
		[[ -n $a && $a == "$b" ]] || { echo "  rev $r: cetcd \"$a\", etcd \"$b\""; bad=1; }
	done
	return $bad
}
check "HashKV is the same at every revision 1..$rev" same_hashkv_all 1

both() { local e; for e in "${eps[@]}"; do etcdctl --endpoints "$e" "$@" >/dev/null; done; }
both compaction 7
check "HashKV is the same at every revision 8..$rev after a compaction at 7" \
	it_until 5000 same_hashkv_all 8
echo "reads after the compaction"
it_same_on_both latest_reads
at9() { reads "$1" 9; }
it_same_on_both at9
cp "$IT_TMP/etcd.out" "$IT_TMP/etcd.at9"
compacted() { echo "> get at 5"; ctl "$1" get --rev 5 "$big" | show; }
it_same_on_both compacted

# a lease (whose id differs between the two: no HashKV from here on)
with_lease() {
	local p=$1 id
	echo "> lease on stem+d"
	id=$(ctl "$p" lease grant 300 | awk '{print $2}')
	ctl "$p" put --lease="$id" "${stem}d" d1
	ctl "$p" lease timetolive --keys "$id" | sed 's/lease [0-9a-f]*/lease ID/; s/remaining([0-9]*s)//'
	ctl "$p" get --prefix "$stem" | show
	ctl "$p" lease revoke "$id" | sed 's/lease [0-9a-f]*/lease ID/'
	ctl "$p" get --prefix "$stem" | show
	echo "> watch --rev 8 --prefix ''"
	{ timeout 3 etcdctl --endpoints "127.0.0.1:$p" watch --rev 8 --prefix '' || true; } | show
}
it_same_on_both with_lease

# ---- defragmentation, a snapshot; cetcd's file: bbolt reads it; cetcd reopens it
check "etcdctl defrag answers on cetcd" etcdctl --endpoints "${eps[0]}" defrag
reads "$IT_CPORT" >"$IT_TMP/cetcd.defrag"
reads "$IT_ETCD_PORT" >"$IT_TMP/etcd.now"
check "cetcd answers as etcd after the defragmentation" \
	diff -u "$IT_TMP/etcd.now" "$IT_TMP/cetcd.defrag"
check "etcdctl snapshot save from cetcd" \
	etcdctl --endpoints "${eps[0]}" snapshot save "$IT_TMP/cetcd.snap"
check "cetcd stops" it_cetcd_stop
db=$IT_TMP/cetcd.data/member/snap/db
check "bbolt's check passes on cetcd's db" "$BOLTCHECK" "$db"
it_cetcd_restart "$IT_TMP/cetcd2.log"
check "cetcd answers again" it_wait_healthy "$IT_CPORT" 30
reads "$IT_CPORT" >"$IT_TMP/cetcd.reopen"
check "cetcd reopened answers as etcd" diff -u "$IT_TMP/etcd.now" "$IT_TMP/cetcd.reopen"
check "cetcd stops again" it_cetcd_stop

# ---- etcd's file: cetcd builds its index from it
kill "$IT_ETCD_PID"
wait "$IT_ETCD_PID" 2>/dev/null || true
IT_CPORT=$IT_ETCD_PORT
IT_PPORT=$IT_ETCD_PPORT
it_cetcd_start lk "$IT_TMP/etcd.data" "$IT_TMP/cetcd-on-etcd.log"
check "cetcd answers on etcd's data dir" it_wait_healthy "$IT_CPORT" 30
reads "$IT_CPORT" >"$IT_TMP/cetcd.rebuilt"
check "cetcd on etcd's db answers as etcd did" diff -u "$IT_TMP/etcd.now" "$IT_TMP/cetcd.rebuilt"
reads "$IT_CPORT" 9 >"$IT_TMP/cetcd.rebuilt9"
check "and at revision 9 as etcd did" diff -u "$IT_TMP/etcd.at9" "$IT_TMP/cetcd.rebuilt9"
check "stored rebuilt the index of etcd's db" \
	it_log_has "$IT_TMP/cetcd-on-etcd.log" '"index-rebuilt":true' 1
check "cetcd stops on etcd's data dir" it_cetcd_stop
check "bbolt's check passes on the db with cetcd's index" "$BOLTCHECK" "$IT_TMP/etcd.data/member/snap/db"

# ---- cetcd's snapshot restored into etcd
it_etcd_start lk "$IT_TMP/etcd2.data" "$IT_TMP/etcd2.log" "$IT_TMP/cetcd.snap"
check "etcd answers from cetcd's snapshot" it_wait_healthy "$IT_ETCD_PORT" 30
reads "$IT_ETCD_PORT" >"$IT_TMP/etcd.restored"
check "etcd restored from cetcd's snapshot answers as before" \
	diff -u "$IT_TMP/etcd.now" "$IT_TMP/etcd.restored"

it_summary
