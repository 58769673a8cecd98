#!/usr/bin/env bash
# The client API on the peer port, as etcd 3.4 serves it there: raftd
# hands HTTP/2 (gRPC) and GET /members/hashkv to a gatewayd over its
# local socket and relays the bytes.
# - http peer URL: etcdctl put, get and endpoint hashkv against the peer
#   URL agree with the client URL; GET /members/hashkv answers etcd's JSON
#   (the hash etcdctl sees) and etcd's texts for a future revision and a
#   bad body
# - a relayed HTTP/2 connection whose gatewayd is killed ends (the client
#   reads EOF) while raftd goes on serving the peer port, and once the
#   gatewayd is back the peer URL serves gRPC again
# - https peer URL with client cert auth (etcd's test fixtures): etcdctl
#   with the peer certificate works through the peer URL, without one it
#   is refused; /members/hashkv over TLS
# Exits 77 when the programs, etcdctl, curl or python3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_program curl "Debian package curl"
it_need_program python3
fixtures=/usr/share/gocode/src/go.etcd.io/etcd/integration/fixtures
it_init peer-grpc

ctl() { etcdctl --dial-timeout 3s --command-timeout 10s "$@"; }
# answers URL BODY TEXT: GET URL with BODY answers the line TEXT.
answers() { curl -s -X GET -d "$2" "$1" | grep -x -- "$3" >/dev/null; }
hash_of() { ctl --endpoints "$1" "${@:2}" endpoint hashkv -w json |
	python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["HashKV"]["hash"])'; }

# ------------------------------------------------------------ http
it_cetcd_start plain "$IT_TMP/plain" "$IT_TMP/plain.log" --gateways 1
it_wait_healthy "$IT_CPORT"
peer=http://127.0.0.1:$IT_PPORT
client=http://127.0.0.1:$IT_CPORT
check "put through the peer URL" ctl --endpoints "$peer" put k1 v1
check "get through the client URL sees it" \
	[ "$(ctl --endpoints "$client" get k1 --print-value-only)" = v1 ]
check "get through the peer URL" [ "$(ctl --endpoints "$peer" get k1 --print-value-only)" = v1 ]
h_peer=$(hash_of "$peer") h_client=$(hash_of "$client")
check "endpoint hashkv through the peer URL ($h_peer) is the client URL's ($h_client)" \
	test -n "$h_peer" -a "$h_peer" = "$h_client"
answer=$(curl -s -X GET -d '{"revision":0}' "$peer/members/hashkv")
check "GET /members/hashkv answers the same hash in etcd's JSON: $answer" \
	python3 -c 'import json, sys
d = json.loads(sys.argv[1])
sys.exit(0 if d["hash"] == int(sys.argv[2]) and d["header"]["revision"] >= 2 and d["compact_revision"] == -1 else 1)' "$answer" "$h_peer"
check "a future revision is refused with etcd's text" \
	answers "$peer/members/hashkv" '{"revision":1000}' 'mvcc: required revision is a future revision'
check "a future revision is a 400" \
	[ "$(curl -s -o /dev/null -w '%{http_code}' -X GET -d '{"revision":1000}' "$peer/members/hashkv")" = 400 ]
check "a body that is not a HashKVRequest is refused with etcd's text" \
	answers "$peer/members/hashkv" nope 'error unmarshalling request'
check "POST /members/hashkv is 405" \
	[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' "$peer/members/hashkv")" = 405 ]
check "the peer port still answers /version itself" curl -sf -o /dev/null "$peer/version"

# A raw HTTP/2 client: the preface and SETTINGS, then the server's
# SETTINGS must come; "ready" is printed, then it waits for EOF and
# prints "eof" (or "open" after 10 s). It sends a PING every 0.5 s, so
# the idle timeout of a handed connection (5 s of silence) never ends it:
# only the gateway's death can.
python3 - "$IT_PPORT" >"$IT_TMP/h2.out" 2>&1 <<'EOF' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
head = s.recv(9)
print("ready" if len(head) == 9 and head[3] == 4 else "bad %r" % head, flush=True)
ping = bytes([0, 0, 8, 6, 0, 0, 0, 0, 0]) + bytes(8)
s.settimeout(0.5)
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    try:
        if not s.recv(4096):
            print("eof", flush=True)
            break
    except socket.timeout:
        try:
            s.sendall(ping)
        except OSError:
            print("eof", flush=True)
            break
    except OSError:
        print("eof", flush=True)
        break
else:
    print("open", flush=True)
EOF
h2pid=$!
it_track "$h2pid"
it_until 5000 grep -q . "$IT_TMP/h2.out" || true
check "a raw HTTP/2 connection on the peer port gets gatewayd's SETTINGS" grep -qx ready "$IT_TMP/h2.out"
gw=$(it_cetcd_child gatewayd-0)
kill -9 "$gw"
it_until 8000 grep -q -e eof -e open "$IT_TMP/h2.out" || true
check "the relayed connection ends when its gatewayd is killed" grep -qx eof "$IT_TMP/h2.out"
check "raftd still answers on the peer port" curl -sf -o /dev/null "$peer/version"
it_wait_child gatewayd-0 "$gw" 30 >/dev/null
it_until 10000 ctl --endpoints "$peer" get k1 >/dev/null 2>&1 || true
check "the peer URL serves gRPC again once gatewayd is back" \
	[ "$(ctl --endpoints "$peer" get k1 --print-value-only)" = v1 ]
check "raftd logged no failure" bash -c "! grep -q '\"level\":\"\\(error\\|fatal\\)\"' '$IT_TMP/plain.log'"
it_cetcd_stop || true

# ------------------------------------------------------------ failover
# gatewayd-0's local socket taken (bound, never listening) before the
# member starts: gatewayd-0 says it cannot listen there, raftd's connect to
# it is refused, and the next gateway serves the peer port.
unset IT_CPORT
mkdir -m 700 "$IT_TMP/fo"
python3 - "$IT_TMP/fo" >"$IT_TMP/squat.out" 2>&1 <<'PY' &
import os, socket, sys, time
st = os.stat(sys.argv[1])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(("\0cetcd-gateway/%x:%x/0" % (st.st_dev, st.st_ino)).encode())
print("bound", flush=True)
time.sleep(120)
PY
squat=$!
it_track "$squat"
it_until 5000 grep -q bound "$IT_TMP/squat.out" || true
it_cetcd_start fo "$IT_TMP/fo" "$IT_TMP/fo.log" --gateways 2
it_wait_healthy "$IT_CPORT"
check "gatewayd-0 warned that its local socket is taken" \
	it_log_has "$IT_TMP/fo.log" '"logger":"gatewayd-0".*cannot listen on the local socket' 1
for n in 1 2 3; do
	check "gRPC through the peer URL, call $n, is served by gatewayd-1" \
		ctl --endpoints "http://127.0.0.1:$IT_PPORT" put "fo$n" x
done
kill "$squat" 2>/dev/null || true
it_cetcd_stop || true

# ------------------------------------------------------------ https
if [[ -r $fixtures/server.crt ]]; then
	unset IT_CPORT
	read -r IT_CPORT IT_PPORT < <(it_free_ports 2)
	purl=https://127.0.0.1:$IT_PPORT
	it_cetcd_start tls "$IT_TMP/tls" "$IT_TMP/tls.log" \
		--listen-peer-urls "$purl" --initial-advertise-peer-urls "$purl" \
		--initial-cluster "tls=$purl" --peer-client-cert-auth \
		--peer-trusted-ca-file "$fixtures/ca.crt" --peer-cert-file "$fixtures/server.crt" \
		--peer-key-file "$fixtures/server.key.insecure"
	it_wait_healthy "$IT_CPORT"
	certs=(--cacert "$fixtures/ca.crt" --cert "$fixtures/server.crt" --key "$fixtures/server.key.insecure")
	check "put through the https peer URL" ctl --endpoints "$purl" "${certs[@]}" put k2 v2
	check "get through the https peer URL" \
		[ "$(ctl --endpoints "$purl" "${certs[@]}" get k2 --print-value-only)" = v2 ]
	h_peer=$(hash_of "$purl" "${certs[@]}") h_client=$(hash_of "http://127.0.0.1:$IT_CPORT")
	check "endpoint hashkv through the https peer URL ($h_peer) is the client URL's ($h_client)" \
		test -n "$h_peer" -a "$h_peer" = "$h_client"
	# refused without a certificate, answered with one right after (a
	# member that is not there refuses everybody)
	refuses_certless() {
		! ctl --dial-timeout 2s --command-timeout 3s --endpoints "$purl" --cacert "$fixtures/ca.crt" \
			get k2 >/dev/null 2>&1 &&
			[ "$(ctl --endpoints "$purl" "${certs[@]}" get k2 --print-value-only)" = v2 ]
	}
	check "without a client certificate the https peer URL refuses gRPC" refuses_certless
	answer=$(curl -s --http1.1 --cacert "$fixtures/ca.crt" --cert "$fixtures/server.crt" \
		--key "$fixtures/server.key.insecure" -X GET -d '{}' "$purl/members/hashkv")
	check "GET /members/hashkv over TLS: $answer" \
		python3 -c 'import json, sys; sys.exit(0 if json.loads(sys.argv[1])["hash"] == int(sys.argv[2]) else 1)' \
		"$answer" "$h_peer"
	it_cetcd_stop || true
else
	echo "skipped the https part: etcd's test fixtures are missing (golang-etcd-server-dev)"
fi
it_summary
