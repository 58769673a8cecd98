#!/usr/bin/env bash
# /metrics and the health endpoints beside Debian's etcd 3.4:
#   - a cetcd member (--listen-metrics-urls, --metrics extensive) and an
#     etcd member side by side: every family etcd 3.4 writes that cetcd
#     writes too has the same TYPE, HELP and label names, histograms the
#     same bucket bounds, and grpc_server_* the same methods and codes;
#     each listed family is written by both;
#   - the same put, get, delete, txns and defrag move etcd_mvcc_*,
#     grpc_server_* and the defrag histogram by the same amounts on both;
#   - /metrics, /health, /livez and /readyz on the metrics listener, and
#     only those there;
#   - a 3-member cetcd cluster: one put raises
#     etcd_server_proposals_committed_total and etcd_mvcc_put_total by
#     one on every member; peer bytes and round trips are counted per
#     peer; with two members stopped, the third answers /health false and
#     503 (as a 3-member etcd cluster's last member does), /readyz 503
#     naming linearizable_read, /livez and /health?serializable=true ok;
#   - NOSPACE raised by filling a small --quota-backend-bytes, on cetcd and
#     on etcd: /health false and 503 on both, true with ?exclude=NOSPACE
#     on both; cetcd's /readyz stays ok (no data corruption).
# Exits 77 when the programs, etcd, etcdctl or curl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_need_program curl
it_init metrics

# The families the comparison must find in both.
listed="etcd_server_has_leader etcd_server_is_leader etcd_server_leader_changes_seen_total
etcd_server_proposals_committed_total etcd_server_proposals_applied_total
etcd_server_proposals_pending etcd_server_proposals_failed_total etcd_server_slow_apply_total
etcd_server_heartbeat_send_failures_total etcd_server_id etcd_server_version
etcd_disk_wal_fsync_duration_seconds etcd_disk_backend_commit_duration_seconds
etcd_disk_backend_defrag_duration_seconds etcd_disk_backend_snapshot_duration_seconds
etcd_mvcc_db_total_size_in_bytes etcd_mvcc_db_total_size_in_use_in_bytes
etcd_debugging_mvcc_keys_total etcd_mvcc_put_total etcd_mvcc_range_total etcd_mvcc_delete_total
etcd_mvcc_txn_total etcd_debugging_mvcc_watcher_total etcd_debugging_mvcc_slow_watcher_total
etcd_network_client_grpc_sent_bytes_total etcd_network_client_grpc_received_bytes_total
grpc_server_started_total grpc_server_handled_total grpc_server_msg_received_total
grpc_server_msg_sent_total grpc_server_handling_seconds process_resident_memory_bytes
process_cpu_seconds_total process_open_fds"

# The text format, read into families: prom.py FILE emits JSON.
cat >"$IT_TMP/prom.py" <<'EOF'
import json, re, sys
fams = {}
def fam_of(name):
    for suf in ("_bucket", "_sum", "_count"):
        base = name[: -len(suf)]
        if name.endswith(suf) and fams.get(base, {}).get("type") == "histogram":
            return base
    return name
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if line.startswith("# HELP "):
        n, _, h = line[7:].partition(" ")
        fams.setdefault(n, {"samples": []})["help"] = h
    elif line.startswith("# TYPE "):
        n, t = line[7:].split(" ")
        fams.setdefault(n, {"samples": []})["type"] = t
    elif line and not line.startswith("#"):
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        if not m:
            print("unparsable line: " + line, file=sys.stderr); sys.exit(1)
        labels = dict(re.findall(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        fams.setdefault(fam_of(m.group(1)), {"samples": []})["samples"].append(
            [m.group(1), labels, float(m.group(4))])
json.dump(fams, sys.stdout)
EOF
# The comparison: compare.py CETCD ETCD LISTED... prints a line per
# difference and exits 1 if there is one.
cat >"$IT_TMP/compare.py" <<'EOF'
import json, sys
c, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
bad = []
for n in sys.argv[3].split():
    for side, f in (("cetcd", c), ("etcd", e)):
        if n not in f or not f[n]["samples"]:
            bad.append("%s does not write %s" % (side, n))
def keys(f):
    return sorted({tuple(sorted(k for k in l if k != "le")) for _, l, _ in f["samples"]})
def les(f):
    seen = {}
    for s, l, _ in f["samples"]:
        if s.endswith("_bucket"):
            key = tuple(sorted((k, v) for k, v in l.items() if k != "le"))
            seen.setdefault(key, []).append(l["le"])
    return sorted({tuple(v) for v in seen.values()})
for n in sorted(set(c) & set(e)):
    if n.startswith("cetcd_"):
        continue
    for what in ("type", "help"):
        if c[n].get(what) != e[n].get(what):
            bad.append("%s: %s %r, etcd's %r" % (n, what, c[n].get(what), e[n].get(what)))
    if keys(c[n]) != keys(e[n]) and c[n]["samples"] and e[n]["samples"]:
        bad.append("%s: labels %s, etcd's %s" % (n, keys(c[n]), keys(e[n])))
    if les(c[n]) != les(e[n]):
        bad.append("%s: buckets %s, etcd's %s" % (n, les(c[n]), les(e[n])))
    if n.startswith("grpc_server_"):
        lv = lambda f: sorted({tuple(sorted(l.items())) for s, l, _ in f["samples"] if "le" not in l})
        if lv(c[n]) != lv(e[n]):
            bad.append("%s: series differ: only cetcd %s, only etcd %s" % (n,
                sorted(set(lv(c[n])) - set(lv(e[n])))[:3], sorted(set(lv(e[n])) - set(lv(c[n])))[:3]))
for b in bad:
    print("  " + b)
sys.exit(1 if bad else 0)
EOF
# value.py "FILE..." NAME [LABEL=VALUE...]: the sample's value in each
# scrape's JSON (summed over the series matching the labels), one a line
cat >"$IT_TMP/value.py" <<'EOF'
import json, sys
want = dict(a.split("=", 1) for a in sys.argv[3:])
for path in sys.argv[1].split():
    f = json.load(open(path))
    tot = 0.0
    fam = sys.argv[2]
    for suf in ("_bucket", "_sum", "_count"):
        if fam not in f and fam.endswith(suf):
            fam = fam[: -len(suf)]
    for s, l, v in f.get(fam, {"samples": []})["samples"]:
        if s == sys.argv[2] and all(l.get(k) == x for k, x in want.items()):
            tot += v
    print(int(tot) if tot == int(tot) else tot)
EOF
scrape() { # scrape URL OUT.json
	curl -sf "$1/metrics" >"$2.txt" && python3 "$IT_TMP/prom.py" "$2.txt" >"$2"
}
val() { python3 "$IT_TMP/value.py" "$@"; }

# side_by_side NAME MPORT [flags...]: a cetcd member serving metrics on
# MPORT too and an etcd member, both with the flags, both answering; sets
# IT_CPORT and EPORT (their client ports)
side_by_side() {
	local name=$1 mport=$2 pport
	shift 2
	unset IT_CPORT IT_PPORT
	read -r EPORT pport < <(it_free_ports 2)
	it_cetcd_start "$name" "$IT_TMP/$name" "$IT_TMP/$name.log" \
		--listen-metrics-urls "http://127.0.0.1:$mport" "$@"
	it_bg "$IT_TMP/e$name.log" etcd --name "e$name" --data-dir "$IT_TMP/e$name" "$@" \
		--listen-client-urls "http://127.0.0.1:$EPORT" --advertise-client-urls "http://127.0.0.1:$EPORT" \
		--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "e$name=http://127.0.0.1:$pport"
	it_wait_healthy "$IT_CPORT"
	it_wait_healthy "$EPORT"
}

# ---- side by side: one cetcd member, one etcd member
read -r mport < <(it_free_ports 1)
side_by_side c "$mport" --metrics extensive
eport=$EPORT
C="http://127.0.0.1:$mport" E="http://127.0.0.1:$eport"
ctlc() { etcdctl --endpoints "127.0.0.1:$IT_CPORT" "$@" >/dev/null; }
ctle() { etcdctl --endpoints "127.0.0.1:$eport" "$@" >/dev/null; }

scrape "$C" "$IT_TMP/c0.json"
scrape "$E" "$IT_TMP/e0.json"
if python3 "$IT_TMP/compare.py" "$IT_TMP/c0.json" "$IT_TMP/e0.json" "$listed" >"$IT_TMP/diff"; then
	ok "every listed family in both; shared families agree in TYPE, HELP, labels, buckets and gRPC series"
else
	fail "cetcd's families differ from etcd's:"
	cat "$IT_TMP/diff"
fi

for side in c e; do
	ctl=ctl$side
	$ctl put k1 v1
	$ctl get k1
	$ctl del k1
	$ctl txn <<<$'\nput t1 v\n\n'
done
scrape "$C" "$IT_TMP/c1.json"
scrape "$E" "$IT_TMP/e1.json"
moved() { # moved NAME [LABELS...]: how much NAME moved, cetcd's then etcd's
	local v
	mapfile -t v < <(val "$IT_TMP/c1.json $IT_TMP/c0.json $IT_TMP/e1.json $IT_TMP/e0.json" "$@")
	echo "$((v[0] - v[1])) $((v[2] - v[3]))"
}
for m in etcd_mvcc_put_total etcd_mvcc_delete_total etcd_mvcc_range_total etcd_debugging_mvcc_keys_total; do
	d=$(moved "$m")
	check "$m moved as etcd's (cetcd, etcd: $d)" test "${d% *}" = "${d#* }"
done
for meth in Put Range DeleteRange Txn; do
	d=$(moved grpc_server_handled_total grpc_method=$meth grpc_code=OK)
	check "grpc_server_handled_total{$meth,OK} moved by one on both ($d)" test "$d" = "1 1"
	d=$(moved grpc_server_started_total grpc_method=$meth)
	check "grpc_server_started_total{$meth} moved by one on both ($d)" test "$d" = "1 1"
	d=$(moved grpc_server_handling_seconds_count grpc_method=$meth)
	check "grpc_server_handling_seconds{$meth} counted one call on both ($d)" test "$d" = "1 1"
done
ctlc txn <<<$'\nput t2 v\nget t1\n\n'
ctle txn <<<$'\nput t2 v\nget t1\n\n'
scrape "$C" "$IT_TMP/c1.json"
scrape "$E" "$IT_TMP/e1.json"
for m in etcd_mvcc_txn_total etcd_mvcc_put_total etcd_mvcc_range_total; do
	d=$(moved "$m")
	check "with a txn of two: $m moved as etcd's (cetcd, etcd: $d)" test "${d% *}" = "${d#* }"
done
ctlc defrag
ctle defrag
scrape "$C" "$IT_TMP/c1.json"
scrape "$E" "$IT_TMP/e1.json"
d=$(moved etcd_disk_backend_defrag_duration_seconds_count)
check "a defrag is counted in etcd_disk_backend_defrag_duration_seconds on both ($d)" test "$d" = "1 1"
check "no defrag in flight after it" grep -q '^etcd_disk_defrag_inflight 0$' "$IT_TMP/c1.json.txt"
check "etcd_disk_wal_fsync_duration_seconds counts WAL syncs" \
	test "$(val "$IT_TMP/c1.json" etcd_disk_wal_fsync_duration_seconds_count)" -gt 0
check "etcd_disk_backend_commit_duration_seconds counts commits" \
	test "$(val "$IT_TMP/c1.json" etcd_disk_backend_commit_duration_seconds_count)" -gt 0
check "process_open_fds sums the member's processes" \
	test "$(val "$IT_TMP/c1.json" process_open_fds)" -gt "$(val "$IT_TMP/c1.json" cetcd_process_open_fds process=raftd)"
check "cetcd_process_* names raftd, stored and a gateway" bash -c \
	"grep -q 'cetcd_process_cpu_seconds_total{process=\"stored\"}' '$IT_TMP/c1.json.txt' &&
	 grep -q 'cetcd_process_cpu_seconds_total{process=\"gatewayd\",slot=\"0\"}' '$IT_TMP/c1.json.txt' &&
	 grep -q 'cetcd_ring_depth_bytes{ring=\"committed\"}' '$IT_TMP/c1.json.txt'"

status() { curl -s -o /dev/null -w '%{http_code}' "$1"; }
body() { curl -s "$1"; }
check "the metrics listener serves /health true" test "$(body "$C/health")" = '{"health":"true"}'
check "the metrics listener serves /livez" test "$(body "$C/livez")" = ok
check "the metrics listener serves /readyz?verbose" test "$(body "$C/readyz?verbose")" = \
	"$(printf '[+]data_corruption ok\n[+]serializable_read ok\n[+]non_learner ok\n[+]linearizable_read ok\nok')"
check "/readyz?exclude=linearizable_read&verbose leaves it out" test "$(body "$C/readyz?exclude=linearizable_read&verbose")" = \
	"$(printf '[+]data_corruption ok\n[+]serializable_read ok\n[+]non_learner ok\nok')"
check "/readyz/linearizable_read runs that check" test "$(body "$C/readyz/linearizable_read?verbose")" = \
	"$(printf '[+]linearizable_read ok\nok')"
check "/livez/linearizable_read is not a check of livez (404)" test "$(status "$C/livez/linearizable_read")" = 404
check "the metrics listener answers /version 404 (etcd's metrics mux)" test "$(status "$C/version")" = 404
check "the client port answers /metrics too" bash -c "curl -sf http://127.0.0.1:$IT_CPORT/metrics | grep -q '^etcd_server_has_leader 1$'"
check "POST /health is 405, as etcd's" test "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$C/health")" = \
	"$(curl -s -o /dev/null -w '%{http_code}' -X POST "$E/health")"
check "/health counted in etcd_server_health_success" bash -c \
	"curl -s $C/metrics | grep -qE '^etcd_server_health_success [1-9]'"
it_cetcd_stop || true

# ---- NOSPACE: a small quota filled, on both
page=$(getconf PAGESIZE)
read -r qmport < <(it_free_ports 1)
side_by_side q "$qmport" --quota-backend-bytes $((16 * page))
eqport=$EPORT
big=$(head -c "$page" /dev/zero | tr '\0' b)
fill() { local i; for ((i = 0; i < 200; i++)); do etcdctl --endpoints "$1" put big "$big" >/dev/null 2>&1 || return 0; done; return 1; }
check "cetcd refuses a put past its quota" fill "127.0.0.1:$IT_CPORT"
check "etcd refuses a put past its quota" fill "127.0.0.1:$eqport"
QC="http://127.0.0.1:$IT_CPORT" QE="http://127.0.0.1:$eqport"
for q in "" "?exclude=NOSPACE" "?exclude=CORRUPT"; do
	c="$(status "$QC/health$q") $(body "$QC/health$q")"
	e="$(status "$QE/health$q") $(body "$QE/health$q")"
	check "NOSPACE raised: /health$q answers as etcd's ($c)" test "$c" = "$e"
done
check "NOSPACE raised: /readyz is ok (no data corruption)" test "$(body "http://127.0.0.1:$qmport/readyz")" = ok
it_cetcd_stop || true

# ---- a 3-member etcd cluster and a 3-member cetcd cluster, two members
# of each stopped: what etcd's last member answers first
it_cl_init metrics-e 3 n
for i in 0 1 2; do it_cl_start "$i" etcd; done
for i in 0 1 2; do it_cl_answers "$i" || { it_summary; exit 1; }; done
it_cl_stop 1 2
it_until 10000 bash -c "curl -s -o /dev/null -w '%{http_code}' http://$(it_cl_ep 0)/health | grep -q 503" || true
ehealth="$(status "http://$(it_cl_ep 0)/health") $(body "http://$(it_cl_ep 0)/health")"
it_cl_stop 0

it_cl_init metrics-c 3 m
for i in 0 1 2; do it_cl_start "$i" cetcd; done
for i in 0 1 2; do it_cl_answers "$i" || { it_summary; exit 1; }; done
declare -a c0 p0
for i in 0 1 2; do
	m=$(curl -s "http://$(it_cl_ep "$i")/metrics")
	c0[i]=$(sed -n 's/^etcd_server_proposals_committed_total //p' <<<"$m")
	p0[i]=$(sed -n 's/^etcd_mvcc_put_total //p' <<<"$m")
done
etcdctl --endpoints "$(it_cl_ep 0)" put one put >/dev/null
for i in 0 1 2; do
	check "member $i: one put raises etcd_server_proposals_committed_total by one" \
		it_until 5000 bash -c "test \"\$(curl -s http://$(it_cl_ep "$i")/metrics | sed -n 's/^etcd_server_proposals_committed_total //p')\" = $((c0[i] + 1))"
	check "member $i: one put raises etcd_mvcc_put_total by one" \
		it_until 5000 bash -c "test \"\$(curl -s http://$(it_cl_ep "$i")/metrics | sed -n 's/^etcd_mvcc_put_total //p')\" = $((p0[i] + 1))"
done
leader=$(it_cl_current_leader)
curl -s "http://$(it_cl_ep "$leader")/metrics" >"$IT_TMP/lead.txt"
check "the leader counts bytes sent to both peers" \
	test "$(grep -cE '^etcd_network_peer_sent_bytes_total\{To="[0-9a-f]+"\} [1-9]' "$IT_TMP/lead.txt")" = 2
check "the leader counts bytes received from both peers" \
	test "$(grep -cE '^etcd_network_peer_received_bytes_total\{From="[0-9a-f]+"\} [1-9]' "$IT_TMP/lead.txt")" = 2
check "the leader times heartbeat round trips to both peers" \
	test "$(grep -cE '^etcd_network_peer_round_trip_time_seconds_count\{To="[0-9a-f]+"\} [1-9]' "$IT_TMP/lead.txt")" = 2
check "the leader says so" grep -q '^etcd_server_is_leader 1$' "$IT_TMP/lead.txt"

it_cl_stop 1 2
MC="http://$(it_cl_ep 0)"
check "no leader: /health becomes false" it_until 15000 bash -c "curl -s -o /dev/null -w '%{http_code}' $MC/health | grep -q 503"
chealth="$(status "$MC/health") $(body "$MC/health")"
check "no leader: /health answers as etcd's last member ($chealth; etcd: $ehealth)" test "$chealth" = "$ehealth"
check "no leader: etcd_server_has_leader 0" bash -c "curl -s $MC/metrics | grep -q '^etcd_server_has_leader 0$'"
check "no leader: /health?serializable=true is true" test "$(body "$MC/health?serializable=true")" = '{"health":"true"}'
check "no leader: /livez is ok" test "$(body "$MC/livez")" = ok
out=$(curl -s -w ' %{http_code}' "$MC/readyz")
names_linearizable() { [[ $out == *"[-]linearizable_read failed: etcdserver: "*" 503" ]]; }
check "no leader: /readyz 503 naming linearizable_read ($(tr '\n' ' ' <<<"$out"))" names_linearizable
check "no leader: /readyz?exclude=linearizable_read is ok" test "$(body "$MC/readyz?exclude=linearizable_read")" = ok
check "no leader: etcd_server_health_failures counted" bash -c "curl -s $MC/metrics | grep -qE '^etcd_server_health_failures [1-9]'"
it_cl_stop 0
it_summary
