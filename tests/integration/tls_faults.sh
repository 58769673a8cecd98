#!/usr/bin/env bash
# TLS on the client port as a user meets it when something is wrong, on a
# cetcd member and on Debian's etcd 3.4 beside it with the same flags
# (--cert-file/--key-file, --trusted-ca-file with --client-cert-auth,
# --client-crl-file, --client-cert-allowed-hostname, an https and an
# http client URL). Each case is tried with a small Python client (one
# HTTP/1.1 /health over TLS) and the outcome kind, accepted or refused,
# must be the one etcd gives; how it was refused (the alert, or the
# connection closed) is shown for both, and where etcd's client gets an
# alert (or a clean close), cetcd's gets one too, not a reset:
#   good client certificate: accepted
#   the client trusts another CA / a certificate of another CA / an
#   expired one / a revoked one (in the CRL) / one whose SANs are not the
#   allowed hostname / none / plain HTTP to the https port / a TLS
#   ClientHello to the http port: refused
# After each case a good client is served within 2 s, and cetcd's
# gatewayd has logged etcd's "rejected connection" for the refusals it
# sees (all but the http port's).
# etcdctl too: the good certificate puts, the revoked one is refused.
# Stalled handshakes: 8 clients connect and send half a ClientHello or
# nothing, and stay; good clients are served meanwhile; cetcd closes them
# once its handshake timeout (10 s) is over and logs why; etcd 3.4 keeps
# them open (it has no such timeout; docs/compat.md).
# Exits 77 when cetcd, etcd or etcdctl 3.4, openssl or python3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_need_program openssl "Debian package openssl"
it_need_program python3
it_init tls-faults

# ------------------------------------------------------------ certificates
pki=$IT_TMP/pki
mkdir -p "$pki/new"
: >"$pki/index.txt"
echo 1000 >"$pki/serial"
echo 1000 >"$pki/crlnumber"
it_mkcert "$pki" ca "faults test ca" self
it_mkcert "$pki" other "another ca" self
cat >"$pki/ca.cnf" <<EOF
[ca]
default_ca = d
[d]
dir = $pki
database = $pki/index.txt
new_certs_dir = $pki/new
serial = $pki/serial
crlnumber = $pki/crlnumber
certificate = $pki/ca.crt
private_key = $pki/ca.key
default_md = sha256
default_crl_days = 1
policy = p
unique_subject = no
[p]
commonName = supplied
EOF
# sign NAME CN EXT [openssl ca flags...]: NAME.crt by the CA, through
# `openssl ca` (which takes a start and end date in the past).
sign() {
	local name=$1 cn=$2
	openssl ecparam -name prime256v1 -genkey -noout -out "$pki/$name.key" 2>/dev/null
	openssl req -new -key "$pki/$name.key" -subj "/CN=$cn" -out "$pki/$name.csr" 2>/dev/null
	printf '%s\n' "$3" >"$pki/$name.ext"
	openssl ca -batch -config "$pki/ca.cnf" -extfile "$pki/$name.ext" -notext \
		-in "$pki/$name.csr" -out "$pki/$name.crt" "${@:4}" 2>"$pki/$name.err"
}
client_ext="extendedKeyUsage=clientAuth
subjectAltName=DNS:good.example"
sign server server "subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth" -days 1
sign good good "$client_ext" -days 1
sign expired good "$client_ext" -startdate 20200101000000Z -enddate 20200102000000Z
sign revoked good "$client_ext" -days 1
sign wronghost good "extendedKeyUsage=clientAuth
subjectAltName=DNS:other.example" -days 1
it_mkcert "$pki" stranger good other "$client_ext"
openssl ca -batch -config "$pki/ca.cnf" -revoke "$pki/revoked.crt" 2>/dev/null
openssl ca -batch -config "$pki/ca.cnf" -gencrl -out "$pki/crl.pem" 2>/dev/null
check "certificates: all made" test -s "$pki/server.crt" -a -s "$pki/good.crt" -a -s "$pki/expired.crt" \
	-a -s "$pki/revoked.crt" -a -s "$pki/wronghost.crt" -a -s "$pki/stranger.crt" -a -s "$pki/crl.pem"
check "certificates: the expired one is past its end" \
	bash -c '! openssl x509 -in "$1" -noout -checkend 0 >/dev/null' _ "$pki/expired.crt"
check "certificates: the CRL lists the revoked one" \
	bash -c 'openssl crl -in "$1" -noout -text | grep -qi "serial number: *$(openssl x509 -in "$2" -noout -serial | cut -d= -f2)"' \
	_ "$pki/crl.pem" "$pki/revoked.crt"

# ------------------------------------------------------------ the client
cat >"$IT_TMP/client.py" <<'EOF'
# client.py MODE PORT [CA [CERT KEY]]: one GET /health on 127.0.0.1:PORT;
# prints "accepted" (an answer saying health) or "refused: HOW".
# MODE tls: over TLS (ALPN http/1.1) trusting CA, presenting CERT;
# plain: plain HTTP.
import socket, ssl, sys
mode, port = sys.argv[1], int(sys.argv[2])
req = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
def how(e):
    if isinstance(e, ssl.SSLEOFError):
        return "closed without an alert"
    if isinstance(e, ssl.SSLError):
        return "alert " + (e.reason or str(e)).lower()
    if isinstance(e, (ConnectionResetError, BrokenPipeError)):
        return "connection reset"
    if isinstance(e, socket.timeout):
        return "no answer in 5 s"
    return type(e).__name__
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    if mode == "tls":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(sys.argv[3])
        if len(sys.argv) > 5:
            ctx.load_cert_chain(sys.argv[4], sys.argv[5])
        ctx.set_alpn_protocols(["http/1.1"])
        s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
    s.sendall(req)
    got = b"".join(iter(lambda: s.recv(65536), b""))
    if b'"health":"true"' in got:
        print("accepted")
    elif got:
        print("refused: answered " + got.split(b"\r\n")[0].decode(errors="replace"))
    else:
        print("refused: closed")
except Exception as e:
    print("refused: " + how(e))
EOF
# try WHO MODE [args]: the client against WHO's (cetcd or etcd) https
# port (the http one for MODE tls-to-http).
try() {
	local who=$1 mode=$2 port
	shift 2
	if [[ $who == cetcd ]]; then port=$IT_CPORT; else port=$IT_ETCD_PORT; fi
	if [[ $mode == tls-to-http ]]; then
		[[ $who == cetcd ]] && port=$IT_CPORT2 || port=$ETCD_HTTP_PORT
		mode=tls
	fi
	timeout 10 python3 "$IT_TMP/client.py" "$mode" "$port" "$@" || echo "refused: client killed after 10 s"
}
# good_fast WHO: a good client is served within 2 s.
good_fast() {
	local t0=$(it_now_ms) out
	out=$(try "$1" tls "$pki/ca.crt" "$pki/good.crt" "$pki/good.key")
	[[ $out == accepted ]] && (($(it_now_ms) - t0 < 2000))
}
rejected() { it_count "$IT_TMP/cetcd.log" '"msg":"rejected connection"'; }

# ------------------------------------------------------------ the members
read -r IT_CPORT IT_CPORT2 IT_PPORT IT_ETCD_PORT ETCD_HTTP_PORT IT_ETCD_PPORT < <(it_free_ports 6)
flags=(--cert-file "$pki/server.crt" --key-file "$pki/server.key" --trusted-ca-file "$pki/ca.crt"
	--client-cert-auth --client-crl-file "$pki/crl.pem" --client-cert-allowed-hostname good.example)
purl="http://127.0.0.1:$IT_PPORT"
mkdir -p "$IT_RT/m"
chmod 700 "$IT_RT/m"
IT_CETCD_ARGS=(--name m --data-dir "$IT_TMP/m" --runtime-dir "$IT_RT/m"
	--listen-client-urls "https://127.0.0.1:$IT_CPORT,http://127.0.0.1:$IT_CPORT2"
	--advertise-client-urls "https://127.0.0.1:$IT_CPORT"
	--listen-peer-urls "$purl" --initial-advertise-peer-urls "$purl"
	--initial-cluster "m=$purl" "${flags[@]}")
it_cetcd_restart "$IT_TMP/cetcd.log"
epurl="http://127.0.0.1:$IT_ETCD_PPORT"
it_bg "$IT_TMP/etcd.log" etcd --name e --data-dir "$IT_TMP/e" \
	--listen-client-urls "https://127.0.0.1:$IT_ETCD_PORT,http://127.0.0.1:$ETCD_HTTP_PORT" \
	--advertise-client-urls "https://127.0.0.1:$IT_ETCD_PORT" \
	--listen-peer-urls "$epurl" --initial-advertise-peer-urls "$epurl" \
	--initial-cluster "e=$epurl" "${flags[@]}"
IT_ETCD_PID=$IT_BG_PID
check "cetcd: a good client is served" it_until 20000 good_fast cetcd
check "etcd: a good client is served" it_until 20000 good_fast etcd

# ------------------------------------------------------------ the cases
# case NAME MODE [client args]: the same outcome kind on both, a good
# client served promptly after it, and (for a refusal on the https port)
# cetcd's "rejected connection" logged.
case_() {
	local name=$1 mode=$2 before c e
	shift 2
	before=$(rejected)
	c=$(try cetcd "$mode" "$@")
	e=$(try etcd "$mode" "$@")
	printf '  %-28s cetcd: %-44s etcd: %s\n' "$name" "$c" "$e"
	check "$name: cetcd ${c%%:*}, as etcd" [ "${c%%:*}" = "${e%%:*}" ]
	[[ $name == good* ]] && check "$name: accepted" [ "$c" = accepted ]
	[[ $name != good* ]] && check "$name: refused" [ "${c%%:*}" = refused ]
	# a refusal etcd gives with an alert (or a clean close) reaches the
	# client as cetcd's alert (or close) too, not as a reset
	[[ $e == "refused: alert"* ]] && check "$name: cetcd refuses with an alert, as etcd" \
		[ "${c#refused: alert}" != "$c" ]
	[[ $e == "refused: closed" ]] && check "$name: cetcd closes, as etcd" [ "$c" = "$e" ]
	# a chain that does not verify: Go's alert, whatever the reason
	[[ $name == "another CA's certificate" || $name == "expired certificate" ]] &&
		check "$name: the alert is bad certificate, as Go's" \
			[ "$c" = "refused: alert sslv3_alert_bad_certificate" ]
	if [[ $name != good* && $mode != tls-to-http ]]; then
		check "$name: cetcd logs the rejected connection" \
			it_until 5000 eval '(($(rejected) > before))'
	fi
	check "$name: a good client is served promptly after it (cetcd)" good_fast cetcd
	check "$name: and on etcd" good_fast etcd
}
case_ "good certificate" tls "$pki/ca.crt" "$pki/good.crt" "$pki/good.key"
case_ "client trusts another CA" tls "$pki/other.crt" "$pki/good.crt" "$pki/good.key"
case_ "another CA's certificate" tls "$pki/ca.crt" "$pki/stranger.crt" "$pki/stranger.key"
case_ "expired certificate" tls "$pki/ca.crt" "$pki/expired.crt" "$pki/expired.key"
case_ "revoked certificate" tls "$pki/ca.crt" "$pki/revoked.crt" "$pki/revoked.key"
case_ "not the allowed hostname" tls "$pki/ca.crt" "$pki/wronghost.crt" "$pki/wronghost.key"
case_ "no client certificate" tls "$pki/ca.crt"
case_ "plaintext to the https port" plain
case_ "TLS to the http port" tls-to-http "$pki/ca.crt" "$pki/good.crt" "$pki/good.key"
check "cetcd: the http port still serves plain HTTP" it_healthy "$IT_CPORT2"
check "cetcd: gatewayd says why (expired)" \
	it_log_has "$IT_TMP/cetcd.log" '"msg":"rejected connection".*certificate has expired' 1
check "cetcd: gatewayd says why (revoked)" \
	it_log_has "$IT_TMP/cetcd.log" '"msg":"rejected connection".*revoked' 1
check "etcd: logs its rejected connections" \
	it_log_has "$IT_TMP/etcd.log" 'rejected connection' 6

ectl() { etcdctl --endpoints "https://127.0.0.1:$1" --dial-timeout 2s --command-timeout 5s --cacert "$pki/ca.crt" "${@:2}"; }
export -f ectl
export pki
check "etcdctl: the good certificate puts" \
	bash -c '[[ $(etcdctl --endpoints "https://127.0.0.1:$1" --dial-timeout 2s --cacert "$2/ca.crt" --cert "$2/good.crt" --key "$2/good.key" put k v) == OK ]]' \
	_ "$IT_CPORT" "$pki"
for who in cetcd etcd; do
	[[ $who == cetcd ]] && p=$IT_CPORT || p=$IT_ETCD_PORT
	check "etcdctl: the revoked certificate is refused ($who)" \
		bash -c '! ectl "$@" >/dev/null 2>&1' _ "$p" --cert "$pki/revoked.crt" --key "$pki/revoked.key" put k v
	check "etcdctl: another CA's certificate is refused ($who)" \
		bash -c '! ectl "$@" >/dev/null 2>&1' _ "$p" --cert "$pki/stranger.crt" --key "$pki/stranger.key" put k v
done

# ------------------------------------------------------------ stalled handshakes
cat >"$IT_TMP/stall.py" <<'EOF'
# stall.py PORT SECONDS: 8 connections, half sending the first 40 bytes of
# a ClientHello, half nothing; prints "ready", then after SECONDS how many
# the server has closed.
import socket, sys, time
port, secs = int(sys.argv[1]), float(sys.argv[2])
hello = bytes.fromhex("160301" "0200" "010001fc" "0303") + bytes(32)
conns = []
for i in range(8):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    if i % 2 == 0:
        s.sendall(hello[:40])
    conns.append(s)
print("ready", flush=True)
end = time.time() + secs
closed = set()
while time.time() < end and len(closed) < len(conns):
    for i, s in enumerate(conns):
        if i in closed:
            continue
        s.settimeout(0.05)
        try:
            if s.recv(4096) == b"":
                closed.add(i)
        except socket.timeout:
            pass
        except OSError:
            closed.add(i)
print("closed %d" % len(closed), flush=True)
EOF
python3 "$IT_TMP/stall.py" "$IT_CPORT" 14 >"$IT_TMP/stall.cetcd" 2>&1 &
sc=$!
python3 "$IT_TMP/stall.py" "$IT_ETCD_PORT" 14 >"$IT_TMP/stall.etcd" 2>&1 &
se=$!
check "stall: the stalled clients connected" \
	it_until 5000 bash -c 'grep -q ready "$1" && grep -q ready "$2"' _ "$IT_TMP/stall.cetcd" "$IT_TMP/stall.etcd"
# (every good client tried in those 6 s must be served, however many
# the machine's speed lets the loop try)
t0=$(it_now_ms)
n=0 tries=0
while (($(it_now_ms) - t0 < 6000)); do
	tries=$((tries + 1))
	good_fast cetcd && n=$((n + 1))
	sleep 0.5
done
check "stall: meanwhile good clients are served (cetcd, $n of $tries in 6 s)" \
	[ "$n" -eq "$tries" -a "$tries" -ge 2 ]
check "stall: and on etcd" good_fast etcd
wait "$sc" "$se" || true
echo "  stalled connections closed within 14 s: cetcd $(cat "$IT_TMP/stall.cetcd" | tail -1), etcd $(tail -1 "$IT_TMP/stall.etcd")"
check "stall: cetcd closed all 8 at its handshake timeout" grep -qx 'closed 8' "$IT_TMP/stall.cetcd"
check "stall: and logged why" \
	it_log_has "$IT_TMP/cetcd.log" '"msg":"rejected connection".*handshake not done within 10s' 8
check "stall: a good client is served after (cetcd)" good_fast cetcd
check "stall: etcd 3.4 kept them (no handshake timeout)" grep -qx 'closed 0' "$IT_TMP/stall.etcd"
check "cetcd: the member stops cleanly" it_cetcd_stop

it_summary
