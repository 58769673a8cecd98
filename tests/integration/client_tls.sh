#!/usr/bin/env bash
# The client port over TLS, with etcdctl, curl and openssl s_client:
# - --cert-file/--key-file on https client URLs: etcdctl (gRPC over TLS,
#   ALPN h2) puts and gets, also a value of 1 MB; curl asks /health and
#   /version over HTTP/1.1 (ALPN "http/1.1"); a plaintext request to the
#   https port gets no answer and gatewayd logs "rejected connection"
# - --trusted-ca-file with --client-cert-auth: etcdctl without a client
#   certificate, or with one of another CA, is refused; with the CA's it
#   works, and a session resumes
# - --auto-tls: every gatewayd serves the one certificate made in
#   <data-dir>/fixtures/client (logged as created once), which etcdctl
#   --insecure-skip-tls-verify accepts, and a session resumes on any of
#   them (they share the region's ticket key)
# - http and https at once: one address serving both schemes (the client's
#   first byte tells), and a second https address
# - one TLS 1.3 session ticket a connection, as Go's server sends, and a
#   session resumed from it
# - https client URLs without certificates or auto TLS: the launcher
#   refuses them with etcd's message
# Exits 77 when the programs, etcdctl 3.4, curl or openssl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_program openssl "Debian package openssl"
it_init client-tls

# ------------------------------------------------------------ certificates
pki=$IT_TMP/pki
mkdir -p "$pki"
cert() { it_mkcert "$pki" "$@"; }
cert ca "client test ca" self
cert other "another ca" self
cert server server ca "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
cert client client ca "extendedKeyUsage=clientAuth"
cert stranger client other "extendedKeyUsage=clientAuth"

# ------------------------------------------------------------ helpers
# start NAME CLIENT-URLS [flags...]: a member whose client URLs are
# CLIENT-URLS (IT_CPORT and IT_CPORT2 free ports to put in them, given
# as {P} and {Q}), advertising the first.
start() {
	local name=$1 urls=$2
	shift 2
	read -r IT_CPORT IT_CPORT2 IT_PPORT < <(it_free_ports 3)
	urls=${urls//\{P\}/$IT_CPORT}
	urls=${urls//\{Q\}/$IT_CPORT2}
	local purl="http://127.0.0.1:$IT_PPORT" rt="$IT_RT/$name"
	mkdir -p "$rt"
	chmod 700 "$rt"
	IT_CETCD_ARGS=(--name "$name" --data-dir "$IT_TMP/$name" --runtime-dir "$rt"
		--listen-client-urls "$urls" --advertise-client-urls "${urls%%,*}"
		--listen-peer-urls "$purl" --initial-advertise-peer-urls "$purl"
		--initial-cluster "$name=$purl" "$@")
	it_cetcd_restart "$IT_TMP/$name.log"
}
# ctl PORT [etcdctl flags and command...]: etcdctl on https://127.0.0.1:PORT.
ctl() {
	local port=$1
	shift
	etcdctl --endpoints "https://127.0.0.1:$port" --dial-timeout 2s --command-timeout 5s "$@"
}
# ready PORT [etcdctl flags...]: until a get through TLS answers.
ready() {
	local port=$1
	shift
	it_until 20000 ctl "$port" "$@" get ready-probe >/dev/null 2>&1 && return 0
	echo "  (https port $port not answering after 20 s)"
	return 1
}
# no_health PORT [curl flags...]: PORT takes connections, and curl with
# the flags given gets no /health from https://127.0.0.1:PORT (or
# http:// when the first flag is --http).
no_health() {
	local port=$1 url
	shift
	url=https://127.0.0.1:$port/health
	[[ ${1:-} == --http ]] && { url=http://127.0.0.1:$port/health; shift; }
	(: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null &&
		! curl -s --max-time 5 "$@" "$url" | grep -q health
}
# Whether etcdctl's put on PORT with the flags given fails while PORT
# takes connections (a member that is not there refuses every put).
put_refused() {
	! ctl "$@" put refused v >/dev/null 2>&1 && (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# ------------------------------------------------------------ certificate files
start files "https://127.0.0.1:{P}" --cert-file "$pki/server.crt" --key-file "$pki/server.key"
check "files: a member with https client URLs starts" ready "$IT_CPORT" --cacert "$pki/ca.crt"
check "files: etcdctl put over TLS" \
	bash -c '[[ $(etcdctl --endpoints "https://127.0.0.1:$1" --cacert "$2" put foo bar) == OK ]]' \
	_ "$IT_CPORT" "$pki/ca.crt"
check "files: etcdctl get over TLS" \
	bash -c '[[ $(etcdctl --endpoints "https://127.0.0.1:$1" --cacert "$2" get foo --print-value-only) == bar ]]' \
	_ "$IT_CPORT" "$pki/ca.crt"
head -c 750000 /dev/urandom | base64 -w0 >"$IT_TMP/big"
ctl "$IT_CPORT" --cacert "$pki/ca.crt" put big <"$IT_TMP/big" >/dev/null
check "files: a 1 MB value goes both ways over TLS" \
	bash -c 'cmp -s <(etcdctl --endpoints "https://127.0.0.1:$1" --cacert "$2" get big --print-value-only | head -c "$(wc -c <"$3")") "$3"' \
	_ "$IT_CPORT" "$pki/ca.crt" "$IT_TMP/big"
check "files: the server's certificate verifies by name (localhost)" \
	bash -c 'etcdctl --endpoints "https://localhost:$1" --cacert "$2" get foo >/dev/null' \
	_ "$IT_CPORT" "$pki/ca.crt"
check "files: a client that trusts another CA refuses the server" \
	put_refused "$IT_CPORT" --cacert "$pki/other.crt"
h=$(curl -s --max-time 5 --cacert "$pki/ca.crt" -w ' %{http_version}' "https://127.0.0.1:$IT_CPORT/health" || true)
check "files: curl /health over TLS says true, over HTTP/1.1" [ "$h" = '{"health":"true"} 1.1' ]
v=$(curl -s --max-time 5 --cacert "$pki/ca.crt" "https://localhost:$IT_CPORT/version" || true)
check "files: curl /version over TLS" grep -q '"etcdserver":"3.4' <<<"$v"
alpn=$(openssl s_client -connect "127.0.0.1:$IT_CPORT" -alpn h2 </dev/null 2>&1 || true)
check "files: a client offering only h2 (gRPC) gets h2" grep -q 'ALPN protocol: h2' <<<"$alpn"
check "files: TLS 1.2 at least" grep -qE '(New, |Protocol *: )TLSv1\.[23]' <<<"$alpn"
# resumption as Go's server offers it: one TLS 1.3 ticket a connection
# (OpenSSL's default is two), and a session resumed from it
tickets=$(sleep 1 | openssl s_client -connect "127.0.0.1:$IT_CPORT" -tls1_3 -msg \
	-sess_out "$IT_TMP/tls.sess" 2>&1 | grep -c '<<< .*NewSessionTicket' || true)
check "files: one session ticket a connection, as etcd's server ($tickets)" [ "$tickets" = 1 ]
resumed=$(openssl s_client -connect "127.0.0.1:$IT_CPORT" -tls1_3 -sess_in "$IT_TMP/tls.sess" \
	</dev/null 2>&1 || true)
check "files: a session resumes from that ticket" grep -q '^Reused, TLSv1.3' <<<"$resumed"
check "files: plain HTTP to the https port gets no answer" no_health "$IT_CPORT" --http
check "files: gatewayd logs the rejected connection" \
	it_wait_log "$IT_TMP/files.log" '"msg":"rejected connection"' 10
check "files: gatewayd logs etcd's TLS lines" \
	it_log_has "$IT_TMP/files.log" '"msg":"starting with client TLS".*client-cert-auth = false' 1
check "files: serving client traffic securely" \
	it_log_has "$IT_TMP/files.log" "\"msg\":\"serving client traffic securely\",\"address\":\"127.0.0.1:$IT_CPORT\"" 1
check "files: the member stops cleanly" it_cetcd_stop

# ------------------------------------------------------------ client cert auth
start auth "https://127.0.0.1:{P}" --cert-file "$pki/server.crt" --key-file "$pki/server.key" \
	--trusted-ca-file "$pki/ca.crt" --client-cert-auth
mine=(--cacert "$pki/ca.crt" --cert "$pki/client.crt" --key "$pki/client.key")
check "client cert auth: the member starts" ready "$IT_CPORT" "${mine[@]}"
check "client cert auth: etcdctl without a certificate is refused" \
	put_refused "$IT_CPORT" --cacert "$pki/ca.crt"
check "client cert auth: etcdctl with a certificate of another CA is refused" \
	put_refused "$IT_CPORT" --cacert "$pki/ca.crt" --cert "$pki/stranger.crt" --key "$pki/stranger.key"
check "client cert auth: and gatewayd says why" \
	it_wait_log "$IT_TMP/auth.log" '"msg":"rejected connection".*certificate' 10
check "client cert auth: etcdctl with the CA's certificate puts" \
	bash -c '[[ $(etcdctl --endpoints "https://127.0.0.1:$1" --cacert "$2" --cert "$3" --key "$4" put k v) == OK ]]' \
	_ "$IT_CPORT" "$pki/ca.crt" "$pki/client.crt" "$pki/client.key"
check "client cert auth: and gets" \
	bash -c '[[ $(etcdctl --endpoints "https://127.0.0.1:$1" --cacert "$2" --cert "$3" --key "$4" get k --print-value-only) == v ]]' \
	_ "$IT_CPORT" "$pki/ca.crt" "$pki/client.crt" "$pki/client.key"
check "client cert auth: curl without a certificate gets no /health" \
	no_health "$IT_CPORT" --cacert "$pki/ca.crt"
h=$(curl -s --max-time 5 --cacert "$pki/ca.crt" --cert "$pki/client.crt" --key "$pki/client.key" \
	"https://127.0.0.1:$IT_CPORT/health" || true)
check "client cert auth: curl with one does" [ "$h" = '{"health":"true"}' ]
# a session of a verified client resumes too (OpenSSL refuses to resume,
# with a fatal alert, where a server verifying peers set no session id
# context)
cc=(-CAfile "$pki/ca.crt" -cert "$pki/client.crt" -key "$pki/client.key")
sleep 1 | openssl s_client -connect "127.0.0.1:$IT_CPORT" -tls1_3 "${cc[@]}" \
	-sess_out "$IT_TMP/auth.sess" >/dev/null 2>&1 || true
resumed=$(openssl s_client -connect "127.0.0.1:$IT_CPORT" -tls1_3 "${cc[@]}" \
	-sess_in "$IT_TMP/auth.sess" </dev/null 2>&1 || true)
check "client cert auth: a session resumes from its ticket" grep -q '^Reused, TLSv1.3' <<<"$resumed"
it_cetcd_stop || true

# ------------------------------------------------------------ auto TLS
start auto "https://127.0.0.1:{P}" --auto-tls --gateways 3
# (etcdctl speaks TLS without certificate flags only when told not to
# use an insecure transport, as etcd's e2e suite tells it)
insecure=(--insecure-transport=false --insecure-skip-tls-verify)
check "auto TLS: the member starts" ready "$IT_CPORT" "${insecure[@]}"
check "auto TLS: etcdctl --insecure-skip-tls-verify puts" \
	bash -c '[[ $(etcdctl --endpoints "https://127.0.0.1:$1" --insecure-transport=false --insecure-skip-tls-verify put a b) == OK ]]' _ "$IT_CPORT"
check "auto TLS: and gets" \
	bash -c '[[ $(etcdctl --endpoints "https://127.0.0.1:$1" --insecure-transport=false --insecure-skip-tls-verify get a --print-value-only) == b ]]' _ "$IT_CPORT"
fx=$IT_TMP/auto/fixtures/client
check "auto TLS: fixtures/client holds cert.pem and key.pem" test -s "$fx/cert.pem" -a -s "$fx/key.pem"
check "auto TLS: three gatewayd made one certificate" \
	[ "$(it_count "$IT_TMP/auto.log" '"msg":"created cert file"')" = 1 ]
check "auto TLS: and started with it" \
	[ "$(it_count "$IT_TMP/auto.log" '"msg":"starting with client TLS".*fixtures/client/cert.pem')" = 3 ]
made=$(openssl x509 -noout -fingerprint -sha256 -in "$fx/cert.pem")
same=1
for _ in 1 2 3 4 5 6 7 8 9; do # new connections land on any of the gatewayd
	served=$(openssl s_client -connect "127.0.0.1:$IT_CPORT" </dev/null 2>/dev/null |
		openssl x509 -noout -fingerprint -sha256 2>/dev/null || true)
	[[ $served == "$made" ]] || same=0
done
check "auto TLS: every connection gets that certificate" [ "$same" = 1 ]
# the three gatewayd encrypt session tickets with the member's one key (in
# the region): a session resumes on whichever of them a reconnection lands
# (with a key each, all 8 land on the one that made the ticket about once in
# 3^8 = 6561 runs)
sleep 1 | openssl s_client -connect "127.0.0.1:$IT_CPORT" -tls1_3 \
	-sess_out "$IT_TMP/auto.sess" >/dev/null 2>&1 || true
reused=0
for _ in 1 2 3 4 5 6 7 8; do
	openssl s_client -connect "127.0.0.1:$IT_CPORT" -tls1_3 -sess_in "$IT_TMP/auto.sess" \
		</dev/null 2>&1 | grep -q '^Reused, TLSv1.3' && reused=$((reused + 1))
done
check "auto TLS: 8 reconnections of one session all resume, whichever gatewayd serves them ($reused)" \
	[ "$reused" = 8 ]
check "auto TLS: it names the listen host" \
	bash -c 'openssl x509 -in "$1" -noout -text | grep -q "IP Address:127.0.0.1"' _ "$fx/cert.pem"
check "auto TLS: a verifying client refuses it" put_refused "$IT_CPORT" --cacert "$pki/ca.crt"
it_cetcd_stop || true

# ------------------------------------------------------------ http and https at once
start both "http://127.0.0.1:{P},https://127.0.0.1:{P},https://127.0.0.1:{Q}" \
	--cert-file "$pki/server.crt" --key-file "$pki/server.key"
check "both: the http side is healthy (it_healthy, as other tests ask)" it_wait_healthy "$IT_CPORT"
check "both: the https side of the same port answers etcdctl" ready "$IT_CPORT" --cacert "$pki/ca.crt"
check "both: the second https port answers etcdctl" ready "$IT_CPORT2" --cacert "$pki/ca.crt"
ctl "$IT_CPORT" --cacert "$pki/ca.crt" put both yes >/dev/null
check "both: what TLS put, plain gRPC reads" \
	bash -c '[[ $(etcdctl --endpoints "http://127.0.0.1:$1" get both --print-value-only) == yes ]]' _ "$IT_CPORT"
check "both: curl /health over http" \
	bash -c '[[ $(curl -s --max-time 5 "http://127.0.0.1:$1/health") == *true* ]]' _ "$IT_CPORT"
check "both: curl /health over https on the same port" \
	bash -c '[[ $(curl -s --max-time 5 --cacert "$2" "https://127.0.0.1:$1/health") == *true* ]]' \
	_ "$IT_CPORT" "$pki/ca.crt"
check "both: one listener serves the port both ways" \
	it_log_has "$IT_TMP/both.log" "serving client traffic insecurely.*127.0.0.1:$IT_CPORT" 1
check "both: and securely" \
	it_log_has "$IT_TMP/both.log" "serving client traffic securely.*127.0.0.1:$IT_CPORT\"" 1
it_cetcd_stop || true

# ------------------------------------------------------------ refusal
read -r cport pport < <(it_free_ports 2)
st=0
"$IT_BIN/cetcd" --name bad --data-dir "$IT_TMP/bad" --runtime-dir "$IT_RT/bad" \
	--listen-client-urls "https://127.0.0.1:$cport" --advertise-client-urls "https://127.0.0.1:$cport" \
	--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
	--initial-cluster "bad=http://127.0.0.1:$pport" 2>"$IT_TMP/bad.log" || st=$?
check "https client URLs without TLS: exit status 1" [ "$st" = 1 ]
check "https client URLs without TLS: etcd's message" \
	grep -qF "TLS key/cert (--cert-file, --key-file) must be provided for client url https://127.0.0.1:$cport with HTTPS scheme" "$IT_TMP/bad.log"

it_summary
