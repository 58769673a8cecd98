#!/usr/bin/env bash
# The peer port over TLS, checked from outside with openssl s_client:
# - --peer-auto-tls on https peer URLs: raftd makes etcd's self-signed
#   certificate in <data-dir>/fixtures/peer (modes 0700/0644/0600, O=etcd,
#   P-521, the listen host as IP SAN), serves exactly that certificate, and
#   answers /version over TLS; a restart keeps the same pair
# - --peer-client-cert-auth with certificate files made here: a client
#   without a certificate, or with one of another CA, gets no answer and
#   raftd logs "rejected connection"; one with the CA's certificate is
#   verified both ways and answered; --peer-cert-allowed-cn refuses
#   another CN
# - an https peer URL without certificates or auto TLS is refused by the
#   launcher with etcd's message
# Exits 77 when the programs, python3, curl or openssl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_program openssl "Debian package openssl"
it_init peer-tls

# start_tls NAME [flags...]: a member whose peer URLs are https, on fresh
# ports; waits until it listens for peers.
start_tls() {
	local name=$1
	shift
	read -r IT_CPORT IT_PPORT < <(it_free_ports 2)
	local purl="https://127.0.0.1:$IT_PPORT"
	it_cetcd_start "$name" "$IT_TMP/$name" "$IT_TMP/$name.log" \
		--listen-peer-urls "$purl" --initial-advertise-peer-urls "$purl" \
		--initial-cluster "$name=$purl" "$@"
	it_wait_log "$IT_TMP/$name.log" '"msg":"listening for peers' 20
}

# ask OUT [s_client flags...]: a TLS client on the peer port that sends a
# request and keeps what comes back (certificates and answer) in OUT.
ask() {
	local out=$1
	shift
	printf 'GET /version HTTP/1.1\r\nHost: x\r\n\r\n' |
		timeout 10 openssl s_client -connect "127.0.0.1:$IT_PPORT" -showcerts \
			-ign_eof "$@" >"$out" 2>&1 || true
}
answered() { grep -q '{"etcdserver":"3.4.23","etcdcluster":' "$1"; }
# refused OUT: the client reached the port (s_client says CONNECTED) and
# got no answer; a member that is not there refuses nothing.
refused() { grep -q '^CONNECTED' "$1" && ! grep -q etcdserver "$1"; }
mode_of() { stat -c %a "$1"; }

# ------------------------------------------------------------ auto TLS
start_tls auto --peer-auto-tls
fx=$IT_TMP/auto/fixtures/peer
check "auto TLS: fixtures/peer is mode 700" [ "$(mode_of "$fx")" = 700 ]
check "auto TLS: cert.pem is mode 666 less the umask" \
	[ "$(mode_of "$fx/cert.pem")" = "$(printf '%o' $((0666 & ~$(umask))))" ]
check "auto TLS: key.pem is mode 600" [ "$(mode_of "$fx/key.pem")" = 600 ]
check "auto TLS: the key is SEC1 (EC PRIVATE KEY), as Go's MarshalECPrivateKey" \
	grep -q -- '-----BEGIN EC PRIVATE KEY-----' "$fx/key.pem"
text=$(openssl x509 -in "$fx/cert.pem" -noout -text)
check "auto TLS: subject O=etcd, self-signed" \
	bash -c '[[ $(openssl x509 -in "$1" -noout -subject) == *"O = etcd"* &&
		$(openssl x509 -in "$1" -noout -issuer) == *"O = etcd"* ]]' _ "$fx/cert.pem"
check "auto TLS: an ECDSA key on P-521" grep -q 'secp521r1\|P-521' <<<"$text"
check "auto TLS: the listen host as IP SAN" grep -q 'IP Address:127.0.0.1' <<<"$text"
check "auto TLS: server auth only" grep -q 'TLS Web Server Authentication$' <<<"$text"
ask "$IT_TMP/auto.out"
served=$(openssl x509 -noout -fingerprint -sha256 <"$IT_TMP/auto.out" 2>/dev/null || true)
made=$(openssl x509 -noout -fingerprint -sha256 -in "$fx/cert.pem")
check "auto TLS: the peer port serves the generated certificate" test -n "$served" -a "$served" = "$made"
check "auto TLS: /version is answered over TLS" answered "$IT_TMP/auto.out"
check "auto TLS: at least TLS 1.2" grep -qE 'Protocol *: TLSv1\.[23]' "$IT_TMP/auto.out"
# (security level 0 lets this client offer TLS 1.1 at all)
ask "$IT_TMP/auto11.out" -tls1_1 -cipher 'DEFAULT@SECLEVEL=0'
check "auto TLS: TLS 1.1 is refused" refused "$IT_TMP/auto11.out"
check "auto TLS: etcd's log lines" it_log_has "$IT_TMP/auto.log" '"msg":"created cert file"' 1
check "auto TLS: starting with peer TLS" it_log_has "$IT_TMP/auto.log" '"msg":"starting with peer TLS"' 1
cp "$fx/cert.pem" "$IT_TMP/auto-first.pem"
check "auto TLS: the member stops cleanly" it_cetcd_stop
it_cetcd_restart "$IT_TMP/auto2.log"
it_wait_log "$IT_TMP/auto2.log" '"msg":"listening for peers' 20
check "auto TLS: a restart keeps the pair" cmp -s "$IT_TMP/auto-first.pem" "$fx/cert.pem"
check "auto TLS: and logs no new one" bash -c '! grep -q "created cert file" "$1"' _ "$IT_TMP/auto2.log"
it_cetcd_stop || true

# ------------------------------------------------------------ client cert auth
pki=$IT_TMP/pki
mkdir -p "$pki"
mkcert() { it_mkcert "$pki" "$@"; }
mkcert ca "test ca" self ""
mkcert other "other ca" self ""
mkcert server member ca "subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
mkcert peer member ca "subjectAltName=IP:127.0.0.1
extendedKeyUsage=clientAuth"
mkcert stranger member other "extendedKeyUsage=clientAuth"
mkcert wrongcn intruder ca "subjectAltName=IP:127.0.0.1
extendedKeyUsage=clientAuth"

start_tls auth --peer-cert-file "$pki/server.crt" --peer-key-file "$pki/server.key" \
	--peer-trusted-ca-file "$pki/ca.crt" --peer-client-cert-auth --peer-cert-allowed-cn member
ask "$IT_TMP/nocert.out" -CAfile "$pki/ca.crt"
check "client cert auth: a client without a certificate gets no answer" refused "$IT_TMP/nocert.out"
check "client cert auth: and raftd logs it" it_wait_log "$IT_TMP/auth.log" '"msg":"rejected connection"' 10
ask "$IT_TMP/stranger.out" -cert "$pki/stranger.crt" -key "$pki/stranger.key"
check "client cert auth: a certificate of another CA gets no answer" refused "$IT_TMP/stranger.out"
ask "$IT_TMP/wrongcn.out" -cert "$pki/wrongcn.crt" -key "$pki/wrongcn.key"
check "allowed CN: another CN gets no answer" refused "$IT_TMP/wrongcn.out"
check "allowed CN: raftd says why" \
	it_wait_log "$IT_TMP/auth.log" 'client certificate authentication failed: CN \\"intruder\\"' 10
ask "$IT_TMP/peer.out" -cert "$pki/peer.crt" -key "$pki/peer.key" -CAfile "$pki/ca.crt" \
	-verify_return_error -verify_ip 127.0.0.1
check "client cert auth: the CA's client is answered" answered "$IT_TMP/peer.out"
check "client cert auth: and verified the server" grep -q 'Verify return code: 0 (ok)' "$IT_TMP/peer.out"
it_cetcd_stop || true

# ------------------------------------------------------------ refusal
read -r cport pport < <(it_free_ports 2)
st=0
"$IT_BIN/cetcd" --name bad --data-dir "$IT_TMP/bad" --runtime-dir "$IT_RT/bad" \
	--listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
	--listen-peer-urls "https://127.0.0.1:$pport" --initial-advertise-peer-urls "https://127.0.0.1:$pport" \
	--initial-cluster "bad=https://127.0.0.1:$pport" 2>"$IT_TMP/bad.log" || st=$?
check "https peer URLs without TLS: exit status 1" [ "$st" = 1 ]
check "https peer URLs without TLS: etcd's message" \
	grep -q "cannot listen on TLS for 127.0.0.1:$pport: KeyFile and CertFile are not presented" "$IT_TMP/bad.log"

it_summary
