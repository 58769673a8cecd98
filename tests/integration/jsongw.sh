#!/usr/bin/env bash
# The HTTP/JSON gateway (gatewayd/jsongw/) side by side with Debian's etcd
# 3.4: the same curl requests go to a single-member cetcd and to etcd, and
# the answers must be the same, status and body, once what differs between
# any two members is masked (cluster and member ids, raft terms, ports,
# the db's size and hash, the version). The requests cover every service
# of etcd's gateway: KV (range, put, deleterange, txn, compaction), Watch
# and LeaseKeepAlive streamed over chunked HTTP/1.1, Lease (its
# /v3/kv/lease/ aliases too), Cluster, Maintenance, Lock and Election,
# /v3beta/, and errors: malformed JSON, unknown fields and values, a
# wrong method, an unknown path, gRPC errors of each service, Auth's
# users and roles, Authenticate while auth is disabled. Then, cetcd alone:
# --enable-grpc-gateway=false turns the paths into 404s.
# Exits 77 when etcd or curl is missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcd
it_init jsongw

it_cetcd_start j1 "$IT_TMP/data" "$IT_TMP/cetcd.log"
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30
it_etcd_start e1 "$IT_TMP/etcd" "$IT_TMP/etcd.log"
check "etcd answers" it_wait_healthy "$IT_ETCD_PORT" 30

# Masks what two members may differ in, in a transcript on stdin.
mask() {
	sed -E -e 's/"hash":[0-9]+/"hash":N/' \
		-e 's/"(cluster_id|member_id|raft_term|ID|leader|memberID|hash|dbSize|dbSizeInUse|raftIndex|raftTerm|raftAppliedIndex)":"[0-9]+"/"\1":"N"/g' \
		-e 's/"version":"3\.4\.[0-9]+"/"version":"3.4.x"/g' \
		-e 's#http://127\.0\.0\.1:[0-9]+#http://127.0.0.1:PORT#g' \
		-e 's/"name":"(e1|j1)"/"name":"NAME"/g' \
		-e 's/"(header)":\{[^}]*\}/"\1":{H}/g'
}

# post PORT PATH BODY: one request, as "PATH BODY", the status and the
# body on the lines after.
post() {
	local out code
	out=$(curl -s -m 5 -X "${METHOD:-POST}" -w '\n%{http_code}' "http://127.0.0.1:$1$2" -d "$3" 2>&1) || true
	code=${out##*$'\n'}
	printf '%s %s\n%s\n%s\n' "$2" "$3" "$code" "${out%$'\n'*}"
}

# stream PORT PATH BODY SECS [PUT]: a streaming request read for SECS
# seconds; with PUT, a put of that JSON goes to PORT half a second in.
stream() {
	local f=$IT_TMP/stream.$1
	curl -s -N -m "$4" "http://127.0.0.1:$1$2" -d "$3" >"$f" 2>/dev/null &
	local pid=$!
	if [[ -n ${5:-} ]]; then
		sleep 0.5
		curl -s -m 3 "http://127.0.0.1:$1/v3/kv/put" -d "$5" >/dev/null
	fi
	wait "$pid" || true
	printf '%s %s (stream)\n' "$2" "$3"
	cat "$f"
	echo
}

# The script, run against one member's client port.
script() {
	local p=$1
	post "$p" /v3/kv/put '{"key":"Zm9v","value":"YmFy"}'
	post "$p" /v3/kv/put '{"key":"Zm9v","value":"YmF6","prev_kv":true}'
	post "$p" /v3beta/kv/put '{"key":"YQ==","value":"MQ=="}'
	post "$p" /v3/kv/put '{"key":"Yg==","value":"Mg==","lease":"0","ignore_value":false}'
	post "$p" /v3/kv/range '{"key":"Zm9v"}'
	post "$p" /v3/kv/range '{"key":"YQ==","range_end":"Yw==","sort_order":"DESCEND","limit":1}'
	post "$p" /v3/kv/range '{"key":"YQ==","rangeEnd":"Yw==","countOnly":true}'
	post "$p" /v3/kv/range '{"key":"YQ==","range_end":"Yw==","keys_only":true,"revision":"3"}'
	post "$p" /v3/kv/range '{"key":"AA==","range_end":"AA==","serializable":true,"unknown_field":[1,{"x":2}]}'
	post "$p" /v3/kv/range ''
	post "$p" /v3/kv/range '{"key":"Zm9v","revision":"100"}'
	post "$p" /v3/kv/range '{"key":"Zm9v","sort_order":1,"sort_target":"VALUE"}'
	post "$p" /v3/kv/txn '{"compare":[{"target":"VALUE","key":"Zm9v","value":"YmF6"}],"success":[{"request_range":{"key":"Zm9v"}},{"request_put":{"key":"Yw==","value":"Mw=="}}],"failure":[{"request_delete_range":{"key":"Zm9v"}}]}'
	post "$p" /v3/kv/txn '{"compare":[{"target":"VERSION","result":"GREATER","key":"Zm9v","version":"5"}],"success":[],"failure":[{"request_delete_range":{"key":"Yw==","prev_kv":true}}]}'
	post "$p" /v3/kv/txn '{"compare":[{"target":"CREATE","key":"YQ==","create_revision":0}],"success":[{"request_txn":{}}]}'
	post "$p" /v3/kv/deleterange '{"key":"Yg==","prev_kv":true}'
	post "$p" /v3/kv/deleterange '{"key":"enp6"}'
	post "$p" /v3/kv/compaction '{"revision":"2"}'
	post "$p" /v3/kv/compaction '{"revision":"2"}'
	post "$p" /v3/kv/compaction '{"revision":"1000"}'
	post "$p" /v3/kv/range '{"key":"Zm9v","revision":"1"}'
	# malformed and unusual bodies
	post "$p" /v3/kv/range '{"key":bad}'
	post "$p" /v3/kv/range '{"key":"Zm9v"'
	post "$p" /v3/kv/range '{"key":"Zm9v","limit":1.5}'
	post "$p" /v3/kv/range '{"key":5}'
	post "$p" /v3/kv/range '{"sort_order":"SIDEWAYS"}'
	post "$p" /v3/kv/range '[1,2]'
	post "$p" /v3/kv/put '{"key":"","value":"eA=="}'
	post "$p" /v3/kv/put '{"key":"eA==","lease":"12345"}'
	post "$p" /v3/kv/nothing '{}'
	post "$p" /v3/nothing '{}'
	METHOD=GET post "$p" /v3/kv/range ''
	METHOD=PUT post "$p" /v3/kv/put '{"key":"Zm9v"}'
	# leases, with ids of their own so both members have the same
	post "$p" /v3/lease/grant '{"ID":1000,"TTL":60}'
	post "$p" /v3/lease/grant '{"ID":"1001","TTL":"90"}'
	post "$p" /v3/lease/grant '{"ID":1000,"TTL":60}'
	post "$p" /v3/lease/grant '{"TTL":-1}'
	post "$p" /v3/kv/put '{"key":"bA==","value":"eA==","lease":1000}'
	post "$p" /v3/lease/timetolive '{"ID":1000,"keys":true}' | sed -E 's/"TTL":"(59|60)"/"TTL":"T"/'
	post "$p" /v3/kv/lease/timetolive '{"ID":"1001"}' | sed -E 's/"TTL":"(89|90)"/"TTL":"T"/'
	post "$p" /v3/lease/timetolive '{"ID":"999"}'
	post "$p" /v3/lease/leases '{}'
	post "$p" /v3/kv/lease/leases ''
	stream "$p" /v3/lease/keepalive '{"ID":1000}' 2
	stream "$p" /v3/lease/keepalive '{"ID":1000} {"ID":"1001"}' 2
	stream "$p" /v3/lease/keepalive '{"ID":4242}' 2
	post "$p" /v3/lease/revoke '{"ID":1000}'
	post "$p" /v3/kv/lease/revoke '{"ID":"1001"}'
	post "$p" /v3/lease/revoke '{"ID":1000}'
	post "$p" /v3/kv/range '{"key":"bA=="}'
	# watch: history, a live event, a bad filter, a cut-short and a bad body
	stream "$p" /v3/watch '{"create_request":{"key":"YQ==","range_end":"Yw==","start_revision":3,"prev_kv":true}}' 2 \
		'{"key":"YQ==","value":"Mg=="}'
	stream "$p" /v3/watch '{"create_request":{"key":"Zm9v","filters":["NODELETE"]}} {"create_request":{"key":"YQ==","watch_id":7}}' 2 \
		'{"key":"Zm9v","value":"cQ=="}'
	stream "$p" /v3/watch '{"create_request":{"key":"Zm9v","start_revision":1}}' 2
	stream "$p" /v3/watch '{"create_request":{"key":"Zm9v"}' 2
	stream "$p" /v3/watch 'nope' 2
	stream "$p" /v3/watch '' 1
	# cluster and maintenance
	post "$p" /v3/cluster/member/list '{}'
	# (the members come in the order of their random ids: left out)
	post "$p" /v3/cluster/member/add '{"peerURLs":["http://127.0.0.1:1"],"isLearner":true}' |
		sed -E 's/,"members":\[.*\]//'
	post "$p" /v3/cluster/member/remove '{"ID":"42"}'
	post "$p" /v3/cluster/member/update '{"ID":"42","peerURLs":["http://127.0.0.1:2"]}'
	post "$p" /v3/cluster/member/promote '{"ID":"42"}'
	post "$p" /v3/cluster/member/add '{"peerURLs":["not a url"]}'
	post "$p" /v3/maintenance/alarm '{"action":"GET"}'
	post "$p" /v3/maintenance/alarm '{"action":"DEACTIVATE","alarm":"NOSPACE"}'
	post "$p" /v3/maintenance/status '{}'
	post "$p" /v3/maintenance/hash '{}'
	post "$p" /v3/maintenance/defragment '{}'
	post "$p" /v3/maintenance/transfer-leadership '{"targetID":"42"}'
	# locks and elections
	post "$p" /v3/lease/grant '{"ID":2000,"TTL":60}'
	post "$p" /v3/lock/lock '{"name":"bG9jaw==","lease":2000}'
	post "$p" /v3/lock/unlock '{"key":"bG9jay8xMTMwMzkzMDMyMzAyNDYzMjA="}'
	post "$p" /v3/lock/unlock '{"key":"bG9jay83ZDA="}'
	post "$p" /v3/election/campaign '{"name":"ZWw=","lease":2000,"value":"djE="}'
	post "$p" /v3/election/leader '{"name":"ZWw="}'
	post "$p" /v3/election/proclaim '{"leader":{"name":"ZWw=","key":"ZWwvN2Qw","rev":"28","lease":"2000"},"value":"djI="}'
	post "$p" /v3/election/proclaim '{"value":"djI="}'
	stream "$p" /v3/election/observe '{"name":"ZWw="}' 1
	post "$p" /v3/election/resign '{"leader":{"name":"ZWw=","key":"ZWwvN2Qw","rev":"28","lease":"2000"}}'
	post "$p" /v3/election/resign '{}'
	post "$p" /v3/election/leader '{"name":"ZWw="}'
	# users and roles
	post "$p" /v3/auth/user/add '{"name":"u1","password":"pw"}'
	post "$p" /v3/auth/user/add '{"name":"u2","options":{"no_password":true}}'
	post "$p" /v3/auth/user/add '{"name":"u1","password":"pw"}'
	post "$p" /v3/auth/user/add '{}'
	post "$p" /v3/auth/role/add '{"name":"r1"}'
	post "$p" /v3/auth/role/grant '{"name":"r1","perm":{"permType":"READWRITE","key":"YQ==","range_end":"Yw=="}}'
	post "$p" /v3/auth/role/get '{"role":"r1"}'
	post "$p" /v3/auth/role/revoke '{"role":"r1","key":"YQ==","range_end":"Yg=="}'
	post "$p" /v3/auth/user/grant '{"user":"u1","role":"r1"}'
	post "$p" /v3/auth/user/get '{"name":"u1"}'
	post "$p" /v3/auth/user/get '{"name":"nobody"}'
	post "$p" /v3/auth/user/changepw '{"name":"u1","password":"pw2"}'
	post "$p" /v3/auth/user/list '{}'
	post "$p" /v3/auth/role/list '{}'
	post "$p" /v3/auth/user/revoke '{"name":"u1","role":"r1"}'
	post "$p" /v3/auth/role/delete '{"role":"r1"}'
	post "$p" /v3/auth/user/delete '{"name":"u2"}'
	post "$p" /v3/auth/enable '{}'
}

script "$IT_CPORT" >"$IT_TMP/cetcd.raw" 2>&1
script "$IT_ETCD_PORT" >"$IT_TMP/etcd.raw" 2>&1
mask <"$IT_TMP/cetcd.raw" >"$IT_TMP/cetcd.out"
mask <"$IT_TMP/etcd.raw" >"$IT_TMP/etcd.out"
n=$(grep -c '^/v3' "$IT_TMP/etcd.out")
if diff "$IT_TMP/etcd.out" "$IT_TMP/cetcd.out" >"$IT_TMP/diff"; then
	ok "$n requests: the same statuses and bodies as etcd 3.4"
else
	fail "$n requests: the same statuses and bodies as etcd 3.4"
	sed 's/^/  /' "$IT_TMP/diff" | head -n 80
	diff -U4 "$IT_TMP/etcd.out" "$IT_TMP/cetcd.out" >"$IT_TMP/diff" || true
	sed 's/^/  /' "$IT_TMP/diff" | head -n 120
fi
check "watch streamed events as {\"result\":...} lines" \
	grep -q '"events":\[{"kv":{"key":"YQ==","create_revision"' "$IT_TMP/cetcd.out"
check "keepalive streamed its answer" grep -q '^{"result":{"header":{H},"ID":"N","TTL":"60"}}' "$IT_TMP/cetcd.out"

# Authenticate with auth disabled: etcd's refusal, as etcd's gateway gives it
out=$(post "$IT_CPORT" /v3/auth/authenticate '{"name":"u1","password":"pw2"}')
want=$(post "$IT_ETCD_PORT" /v3/auth/authenticate '{"name":"u1","password":"pw2"}')
check "Authenticate through the gateway: etcd's answer while auth is disabled" \
	test "$out" = "$want"
check "Authenticate: code 9, authentication is not enabled" \
	grep -q 'authentication is not enabled","code":9}$' <<<"$out"

# Snapshot streams the db as {"result":{...,"blob":...}} chunks; the
# blobs put together are the db, which etcdctl reads
curl -s -m 10 "http://127.0.0.1:$IT_CPORT/v3/maintenance/snapshot" -d '{}' >"$IT_TMP/snap.json"
python3 - "$IT_TMP/snap.json" "$IT_TMP/snap.db" <<'PY'
import base64, json, sys
out = open(sys.argv[2], "wb")
for line in open(sys.argv[1]):
    out.write(base64.b64decode(json.loads(line)["result"].get("blob", "")))
PY
snap_reads() { etcdctl snapshot status "$IT_TMP/snap.db" >/dev/null 2>&1; }
check "Snapshot through the gateway: a db etcdctl reads" snap_reads

# A watch whose HTTP client does not read: the gateway stops taking its
# answers (the stream's window is not given back) and the server holds
# the events, so 30 MB of events (40 MB as JSON) leave the gateways'
# own memory (RssAnon: the event ring's shared pages are not theirs) where
# it was, give or take; the other requests go on meanwhile
gw_rss_kb() {
	local p sum=0
	for p in $(pgrep -P "$IT_CETCD_PID" gatewayd); do
		sum=$((sum + $(awk '/^RssAnon:/ {print $2}' "/proc/$p/status")))
	done
	echo "$sum"
}
python3 - "$IT_CPORT" <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
body = b'{"create_request":{"key":"YmlnAA==","range_end":"YmlnAQ=="}}'
s.sendall(b"POST /v3/watch HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
time.sleep(60)
PY
slow=$!
sleep 0.5
rss0=$(gw_rss_kb); t_puts=$(date +%s%N)
python3 - "$IT_CPORT" <<'PY'
import base64, json, sys, urllib.request
v = base64.b64encode(b"x" * 100000).decode()
for i in range(300):
    k = base64.b64encode(b"big\x00" + str(i).encode()).decode()
    urllib.request.urlopen("http://127.0.0.1:%s/v3/kv/put" % sys.argv[1],
                           json.dumps({"key": k, "value": v}).encode()).read()
PY
rss1=$(gw_rss_kb); puts_ms=$(( ($(date +%s%N) - t_puts) / 1000000 ))
echo "  (300 puts in $puts_ms ms; gatewayd RssAnon ${rss0} kB before them, ${rss1} kB after)"
check "the other requests go on meanwhile (300 puts within 15 s)" test "$puts_ms" -lt 15000
check "a watch that does not read holds the gateway's memory under 16 MB more" \
	test $((rss1 - rss0)) -lt 16384
kill "$slow" 2>/dev/null || true

# --enable-grpc-gateway=false: etcd's mux has no /v3/ then
it_cetcd_stop
unset IT_CPORT IT_PPORT
it_cetcd_start j2 "$IT_TMP/data2" "$IT_TMP/cetcd2.log" --enable-grpc-gateway=false \
	--max-concurrent-streams 5
check "cetcd answers without the gateway" it_wait_healthy "$IT_CPORT" 30
out=$(post "$IT_CPORT" /v3/kv/range '{"key":"Zm9v"}')
check "without the gateway /v3/kv/range is 404" grep -qx '404' <<<"$(sed -n 2p <<<"$out")"
# --max-concurrent-streams goes into the client port's HTTP/2 SETTINGS
if command -v nghttp >/dev/null; then
	settings() {
		nghttp -nv -H 'content-type: application/grpc' "http://127.0.0.1:$IT_CPORT/etcdserverpb.KV/Range" 2>&1 |
			grep -q 'SETTINGS_MAX_CONCURRENT_STREAMS(0x03):5\]'
	}
	check "--max-concurrent-streams 5 is in the server's SETTINGS" settings
fi
it_summary
