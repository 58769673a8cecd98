#!/usr/bin/env bash
# Maintenance.HashKV and Hash of cetcd against Debian's etcd 3.4: a fresh
# etcd and a fresh cetcd member, side by side, take the same puts
# (overwrites, binary keys and values), deletes (one key, a prefix), txns
# (both branches) and compactions through etcdctl. `etcdctl endpoint
# hashkv` must then give both the same hash, compact revision and header
# revision, at the current revision and at every revision with --rev,
# before and after each compaction; a compacted or a future revision must
# be refused by both with etcd's text. Maintenance.Hash (over the whole db)
# is sent by curl as a raw gRPC call: member and cluster ids are in the db
# (the members bucket), and they differ between two members on other
# ports, so its value is not compared; the test checks it answers, changes
# with the data and not otherwise, and carries the current revision.
# Exits 77 when etcd, etcdctl, curl or python3 is missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcd
it_need_etcdctl
it_need_program python3 "Debian package python3"
it_need_program curl "Debian package curl"
curl --version | grep -qw HTTP2 || it_skip "this curl cannot speak HTTP/2"
it_init hashkv-etcd

it_cetcd_start h1 "$IT_TMP/cetcd.data" "$IT_TMP/cetcd.log"
it_etcd_start h1 "$IT_TMP/etcd.data" "$IT_TMP/etcd.log"
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30
check "Debian's etcd answers" it_wait_healthy "$IT_ETCD_PORT" 30
eps=("127.0.0.1:$IT_CPORT" "127.0.0.1:$IT_ETCD_PORT")

# both ARGS...: the same etcdctl command against both members.
both() {
	local ep
	for ep in "${eps[@]}"; do
		etcdctl --endpoints "$ep" --command-timeout=10s "$@" >/dev/null
	done
}

# both_txn SCRIPT: the same `etcdctl txn` (SCRIPT on its stdin) to both.
both_txn() {
	local ep
	for ep in "${eps[@]}"; do
		printf '%s' "$1" | etcdctl --endpoints "$ep" --command-timeout=10s txn >/dev/null
	done
}

# hashkv EP REV: "hash compact_revision header_revision", or the error text.
hashkv() {
	local out
	if out=$(etcdctl --endpoints "$1" --command-timeout=30s endpoint hashkv --rev "$2" \
		-w json 2>&1); then
		python3 -c '
import json, sys
h = json.loads(sys.argv[1])[0]["HashKV"]
print(h.get("hash", 0), h.get("compact_revision", 0), h["header"]["revision"])
' "$out"
	else
		# the error etcd's client prints, without its timestamp and endpoint
		sed -n 's/.*error: //p; s/.*Error: //p' <<<"$out" | head -1
	fi
}

# same_hashkv REV KIND: both members answer HashKV at REV alike, with a
# hash when KIND is "hash", with etcd's error about the revision when it
# is "error" (two members that could not be asked fail alike too).
same_hashkv() {
	local a b re='^[0-9]+ -?[0-9]+ [0-9]+$'
	a=$(hashkv "${eps[0]}" "$1")
	b=$(hashkv "${eps[1]}" "$1")
	if [[ $a == "$b" && -n $a ]] && { [[ $2 == hash && $a =~ $re ]] || [[ $2 == error && $a == *"mvcc: required revision"* ]]; }; then
		return 0
	fi
	echo "  rev $1: cetcd \"$a\", etcd \"$b\" (want a $2)"
	return 1
}

# check_revs FROM TO: HashKV at the current revision and at FROM..TO.
check_revs() {
	local r bad=0
	same_hashkv 0 hash || bad=1
	for ((r = $1; r <= $2; r++)); do
		same_hashkv "$r" hash || bad=1
	done
	return $bad
}

rev_of() {
	etcdctl --endpoints "$1" get x -w json |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])'
}

echo "same history on both: empty"
check "HashKV of empty stores is the same" check_revs 1 1
check "HashKV at a future revision is refused alike" same_hashkv 5 error

h0=$(it_hash "${eps[0]}")
check "cetcd answers Maintenance.Hash at revision 1 ($h0)" [ "${h0#* }" = 1 ]

both put foo bar
both put foo bar2
both put foo/a 1
both put foo/b 2
both put $'\x01\xff binary' $'\xff\x00\x01'
both put zz old
both del zz
both put zz new
both_txn $'value("foo") = "bar2"\n\nput foo bar3\nput txn/1 one\n\nput foo failed\n\n'
both_txn $'version("nope") > "0"\n\nput never x\n\nput txn/2 two\ndel foo/a\n\n'
both put foo bar4
both del --prefix txn/
both put after del
now=$(rev_of "${eps[0]}")
check "both are at revision $now" [ "$now" = "$(rev_of "${eps[1]}")" ]
check "HashKV at every revision 1..$now is the same" check_revs 1 "$now"

h1=$(it_hash "${eps[0]}")
check "Maintenance.Hash changed with the data and has revision $now ($h1)" \
	[ "${h1% *}" != "${h0% *}" -a "${h1#* }" = "$now" ]
check "Maintenance.Hash is the same when nothing changed" [ "$(it_hash "${eps[0]}")" = "$h1" ]
check "etcd answers Maintenance.Hash at revision $now too" \
	[ "$(it_hash "${eps[1]}" | cut -d' ' -f2)" = "$now" ]

compact=$((now - 6))
both compaction "$compact"
both put foo bar5
both put a/b c
now=$(rev_of "${eps[0]}")
# etcd's readers see a compaction's last deletions once its backend
# commits (within 100 ms); HashKV leaves them out either way
check "HashKV after a compaction at $compact is the same at $((compact + 1))..$now" \
	it_until 5000 check_revs $((compact + 1)) "$now"
check "HashKV at the compacted revision is refused alike" same_hashkv "$compact" error
check "HashKV below it is refused alike" same_hashkv $((compact - 2)) error
check "HashKV at a future revision is refused alike" same_hashkv $((now + 1)) error
echo "  cetcd at the compacted revision: $(hashkv "${eps[0]}" "$compact")"

# a compaction at the current revision, then every key deleted: the
# compacted keys' last puts count again (etcd's Keep is empty)
both compaction "$now"
both del --prefix ""
both put k v
both del k
now2=$(rev_of "${eps[0]}")
check "HashKV with no key left is the same at $((now + 1))..$now2" \
	it_until 5000 check_revs $((now + 1)) "$now2"

it_summary
