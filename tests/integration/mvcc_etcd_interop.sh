#!/usr/bin/env bash
# The MVCC layer against Debian's etcd 3.4, both ways:
#  - etcd -> cetcd: a live etcd takes puts (binary keys, overwrites, a
#    lease), deletes, txns and a compaction through etcdctl; the answers of
#    etcdctl get (prefix, from key, ranges, limits, every sort target and
#    order, keys only, history, compacted and future revisions) are kept,
#    `etcdctl snapshot save` copies the db and etcd stops. cetcd-dbtool opens
#    the snapshot (its sha256 trailer stripped), rebuilds the index, and
#    answers every one of those ranges the same.
#  - cetcd -> etcd: cetcd-dbtool writes a db through the MVCC layer;
#    `etcdctl snapshot status` reports the hash, revision and total key
#    count (every bucket, cetcd's too) that cetcd-dbtool computes; the
#    snapshot etcd took, now holding cetcd's index, reports the same too;
#    `etcdctl snapshot restore` of cetcd's db starts an etcd that serves the
#    same keys, values and revisions as cetcd-dbtool reads.
# Exits 77 when etcd, etcdctl or python3 is missing.
source "$(dirname "$0")/lib.sh"
it_need_etcd
it_need_etcdctl
it_need_program python3 "Debian package python3"
dbtool=$IT_BIN/cetcd-dbtool
[[ -x $dbtool ]] || it_skip "$dbtool is not built"
it_init mvcc-interop
work=$IT_TMP

# start_etcd NAME DATA_DIR [SNAPSHOT]: etcd (from SNAPSHOT when given) on
# fresh loopback ports; sets $ep, waits until it answers.
start_etcd() {
	it_etcd_start "$1" "$2" "$work/$1.log" "${3:-}" || return 1
	ep=http://127.0.0.1:$IT_ETCD_PORT
	it_wait_healthy "$IT_ETCD_PORT" 30 && return 0
	echo "etcd did not start; its log:"
	tail -20 "$work/$1.log"
	return 1
}

stop_etcd() {
	kill "$IT_ETCD_PID"
	wait "$IT_ETCD_PID" 2>/dev/null || true
}

ctl() {
	etcdctl --endpoints "$ep" --command-timeout=10s "$@"
}

# etcdctl's JSON answer to get, in cetcd-dbtool's lines.
json_lines() {
	python3 -c '
import base64, json, sys
d = json.load(sys.stdin)
print("revision", d["header"]["revision"])
print("count", d.get("count", 0))
print("more", 1 if d.get("more") else 0)
for kv in d.get("kvs", []):
    k = base64.b64decode(kv["key"]).hex()
    v = base64.b64decode(kv.get("value", "")).hex()
    print("kv k=%s v=%s c=%d m=%d ver=%d l=%d" % (k, v, kv.get("create_revision", 0),
          kv.get("mod_revision", 0), kv.get("version", 0), kv.get("lease", 0)))
'
}

hex() {
	printf '%s' "$1" | od -An -tx1 -v | tr -d ' \n'
}

# Range cases: "etcdctl get arguments|cetcd-dbtool get arguments". Keys of
# the dbtool side are hex; RangeRequest enums: target KEY 0, VERSION 1,
# CREATE 2, MOD 3, VALUE 4; order NONE 0, ASCEND 1, DESCEND 2. etcdctl
# sends order NONE for KEY+ASCEND (clientv3.WithSort).
cases=(
	"--from-key \"\"|00 --end 00"
	"--prefix foo|$(hex foo) --end $(hex fop)"
	"foo|$(hex foo)"
	"a z|$(hex a) --end $(hex z)"
	"--from-key \"\" --limit 3|00 --end 00 --limit 3"
	"--from-key \"\" --limit 3 --sort-by=MODIFY|00 --end 00 --limit 3 --target 3"
	"--from-key \"\" --limit 4 --sort-by=CREATE --order=DESCEND|00 --end 00 --limit 4 --target 2 --order 2"
	"--from-key \"\" --sort-by=VERSION --order=ASCEND|00 --end 00 --target 1 --order 1"
	"--from-key \"\" --limit 2 --sort-by=VALUE --order=DESCEND|00 --end 00 --limit 2 --target 4 --order 2"
	"--from-key \"\" --limit 2 --order=DESCEND|00 --end 00 --limit 2 --order 2"
	"--from-key \"\" --sort-by=KEY --order=ASCEND --limit 2|00 --end 00 --limit 2"
	"--prefix foo --keys-only|$(hex foo) --end $(hex fop) --keys-only"
)

# ---------------------------------------------------------------- etcd -> cetcd
echo "etcd -> cetcd: writing through a live etcd"
start_etcd src "$work/src.etcd"
ctl put foo bar >/dev/null
ctl put foo bar2 >/dev/null
ctl put foo/a 1 >/dev/null
ctl put foo/b 2 >/dev/null
ctl put fo 0 >/dev/null
ctl put zz old >/dev/null
ctl del zz >/dev/null
ctl put zz new >/dev/null
ctl put $'\x01\xff\xfe binary' $'\xff\x00\x01' >/dev/null
ctl put $'\xff' last >/dev/null
lease=$(ctl lease grant 3000 | awk '{print $2}')
ctl put leased v --lease="$lease" >/dev/null
printf 'value("foo") = "bar2"\n\nput foo bar3\nput txn/1 one\n\nput foo failed\n\n' | ctl txn >/dev/null
printf 'version("nope") > "0"\n\nput never x\n\nput txn/2 two\ndel foo/a\n\n' | ctl txn >/dev/null
mid=$(ctl get foo -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
ctl put foo bar4 >/dev/null
ctl del --prefix txn/ >/dev/null
ctl put after del >/dev/null
compact=$((mid - 3))
ctl compaction "$compact" >/dev/null
ctl put foo bar5 >/dev/null
ctl put a/b c >/dev/null
now=$(ctl get foo -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
echo "etcd at revision $now, compacted at $compact"

revs=("" "$compact" "$mid" $((now - 1)))
n=0
for c in "${cases[@]}"; do
	for r in "${revs[@]}"; do
		eargs=${c%%|*}
		dargs=${c#*|}
		[ -n "$r" ] && eargs="$eargs --rev $r" && dargs="$dargs --rev $r"
		eval "ctl get $eargs -w json" | json_lines >"$work/etcd.$n"
		echo "$dargs" >"$work/args.$n"
		n=$((n + 1))
	done
done
ctl get foo --rev $((compact - 1)) >"$work/etcd.compacted" 2>&1 || true
ctl get foo --rev $((now + 5)) >"$work/etcd.future" 2>&1 || true
ctl snapshot save "$work/snap.db" >/dev/null
stop_etcd

strip_trailer() {
	python3 - "$1" <<'EOF'
import hashlib, os, sys
p = sys.argv[1]
d = open(p, "rb").read()
if len(d) > 32 and hashlib.sha256(d[:-32]).digest() == d[-32:]:
    os.truncate(p, len(d) - 32)
    sys.exit(0)
sys.exit(1)
EOF
}
check "etcd's snapshot ends with its sha256 trailer (stripped)" strip_trailer "$work/snap.db"

opened() {
	"$dbtool" open "$work/snap.db" >"$work/open.out" &&
		grep -qx "index_rebuilt 1" "$work/open.out" &&
		grep -qx "revision $now" "$work/open.out" &&
		grep -qx "compact_revision $compact" "$work/open.out"
}
check "cetcd opens etcd's snapshot: index rebuilt, revision $now, compacted at $compact" opened

same_ranges() {
	local i bad=0
	for ((i = 0; i < n; i++)); do
		# shellcheck disable=SC2046
		if ! "$dbtool" get "$work/snap.db" $(cat "$work/args.$i") >"$work/ours.$i" ||
			! cmp -s "$work/etcd.$i" "$work/ours.$i"; then
			echo "  range $i ($(cat "$work/args.$i")) differs:"
			diff "$work/etcd.$i" "$work/ours.$i" | head -10
			bad=1
		fi
	done
	[ "$bad" -eq 0 ]
}
check "cetcd answers $n ranges on etcd's db as etcd did" same_ranges

same_error() {
	local want=$1 file=$2
	shift 2
	"$dbtool" get "$work/snap.db" "$@" >"$work/err.ours" 2>&1 && return 1
	grep -q "Error: $want" "$file" && grep -q "$want" "$work/err.ours"
}
check "compacted revision: etcd's error text" same_error \
	"etcdserver: mvcc: required revision has been compacted" "$work/etcd.compacted" \
	"$(hex foo)" --rev $((compact - 1))
check "future revision: etcd's error text" same_error \
	"etcdserver: mvcc: required revision is a future revision" "$work/etcd.future" \
	"$(hex foo)" --rev $((now + 5))

same_status() {
	local db=$1
	etcdctl snapshot status "$db" -w json >"$work/status.etcd" &&
		"$dbtool" status "$db" >"$work/status.ours" &&
		python3 - "$work/status.etcd" "$work/status.ours" <<'EOF'
import json, sys
e = json.load(open(sys.argv[1]))
o = json.load(open(sys.argv[2]))
for k in ("hash", "revision", "totalKey"):
    if e[k] != o[k]:
        print("  %s: etcdctl %s, cetcd-dbtool %s" % (k, e[k], o[k]))
        sys.exit(1)
print("  hash %d, revision %d, totalKey %d" % (e["hash"], e["revision"], e["totalKey"]))
EOF
}
check "etcdctl snapshot status of etcd's db with cetcd's index" same_status "$work/snap.db"

# ---------------------------------------------------------------- cetcd -> etcd
echo "cetcd -> etcd: writing through the MVCC layer"
"$dbtool" write "$work/ours.db" 42 3000 >"$work/write.out"
ours_rev=$(awk '$1 == "revision" {print $2}' "$work/write.out")
ours_compact=$(awk '$1 == "compact_revision" {print $2}' "$work/write.out")
echo "cetcd db at revision $ours_rev, compacted at $ours_compact"
check "etcdctl snapshot status of cetcd's db" same_status "$work/ours.db"

start_etcd restored "$work/restored.etcd" "$work/ours.db"
same_restored() {
	local r bad=0
	for r in "" "$ours_compact" $(((ours_compact + ours_rev) / 2)); do
		local ea=() da=()
		[ -n "$r" ] && ea=(--rev "$r") && da=(--rev "$r")
		ctl get --from-key "" "${ea[@]}" -w json | json_lines >"$work/r.etcd"
		"$dbtool" get "$work/ours.db" 00 --end 00 "${da[@]}" >"$work/r.ours"
		if ! cmp -s "$work/r.etcd" "$work/r.ours"; then
			echo "  at revision '${r:-current}':"
			diff "$work/r.etcd" "$work/r.ours" | head -10
			bad=1
		fi
	done
	[ "$bad" -eq 0 ] && [ "$(grep -c '^kv ' "$work/r.ours")" -gt 0 ]
}
check "etcd restored from cetcd's db serves the same keys and revisions" same_restored
stop_etcd

it_summary
