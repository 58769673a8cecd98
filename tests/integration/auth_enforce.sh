#!/usr/bin/env bash
# Auth enforced, beside Debian's etcd 3.4:
#   1. the same etcdctl commands against a cetcd member and an etcd member
#      (auth enabled; alice holds a prefix, a from-key and a range
#      permission; bob none): get, put, del, txn, watch, lease grant,
#      defrag, member add, elections and locks, each allowed or denied, and with no user
#      or a wrong password, print the same lines on both;
#   2. a simple token through the JSON gateway (its Authorization field)
#      works, and after --auth-token-ttl seconds unused is refused as
#      invalid on both;
#   3. cetcd alone, with client TLS, --client-cert-auth and JWT tokens
#      signed with an RSA key made by openssl: the CN of a client
#      certificate is the user when no token is given; a user's token wins
#      over the certificate; a JWT signed by another key is refused.
# Exits 77 when the programs, etcd, etcdctl, curl or openssl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_etcd
it_need_program curl
it_need_program openssl "Debian package openssl"
it_init authenforce

# ctl PORT ARGS...: etcdctl's stdout and stderr without clientv3's retry
# warnings, the port and member or lease ids made alike.
ctl() {
	local port=$1
	shift
	etcdctl --dial-timeout 2s --command-timeout 5s --endpoints "127.0.0.1:$port" "$@" \
		</dev/null 2>&1 | grep -v '^{"level"' |
		sed -e "s/127\.0\.0\.1:$port/ADDR/g" -e 's/\b[0-9a-f]\{16\}\b/ID/g' || true
}

# The commands of part 1, one per line: "AS user:pw|-" then etcdctl's words.
script='- user add root:rootpw
- user grant-role root root
- user add alice:alicepw
- user add bob:bobpw
- role add rp
- role grant-permission --prefix rp readwrite a/
- role add rf
- role grant-permission --from-key rf read m
- role add rr
- role grant-permission rr readwrite k1 k5
- user grant-role alice rp
- user grant-role alice rf
- user grant-role alice rr
- auth enable
- put a/1 x
- get a/1
root:rootpw put a/1 v1
root:rootpw put m1 v2
root:rootpw put k2 v3
root:rootpw put x v4
alice:wrong get a/1
nobody:pw get a/1
alice:alicepw get a/1
alice:alicepw get --prefix a/
alice:alicepw put a/2 v5
alice:alicepw get a/2
alice:alicepw put x v6
alice:alicepw get x
alice:alicepw get m1
alice:alicepw get --from-key m
alice:alicepw get --from-key a
alice:alicepw put m1 v7
alice:alicepw get k1 k5
alice:alicepw get k1 k6
alice:alicepw put k3 v8
alice:alicepw del k3
alice:alicepw del x
alice:alicepw del --prefix a/
alice:alicepw txn
bob:bobpw get a/1
bob:bobpw put a/1 v9
bob:bobpw defrag
root:rootpw defrag
alice:alicepw member add m2 --peer-urls http://127.0.0.1:1
alice:alicepw lease grant 60
root:rootpw put b/1 v13
alice:alicepw elect b v14
alice:alicepw lock b
- user list'

# txn bodies: a compare on a key alice may read, a put she may make, then
# the same with a key she may not
txn_ok='value("k2") = "v3"

put a/3 v10

'
txn_no='value("x") = "v4"

put a/3 v11

'

run_script() {
	local port=$1 who line args i=0
	while IFS= read -r line <&3; do
		who=${line%% *}
		args=${line#* }
		echo "> $line"
		local u=()
		[[ $who != - ]] && u=(--user "$who")
		if [[ $args == txn ]]; then
			ctl "$port" "${u[@]}" txn <<<"$txn_ok"
			ctl "$port" "${u[@]}" txn <<<"$txn_no"
			continue
		fi
		# shellcheck disable=SC2086 # words on purpose
		ctl "$port" "${u[@]}" $args
	done 3<<<"$script"
	# watches: b is not alice's (her from-key range starts at m)
	echo "> alice watch b"
	timeout 3 etcdctl --endpoints "127.0.0.1:$port" --user alice:alicepw watch b 2>&1 |
		grep -v '^{"level"' || true
	echo "> alice watch --prefix a/"
	timeout 2 etcdctl --endpoints "127.0.0.1:$port" --user alice:alicepw watch --prefix a/ 2>&1 |
		grep -v '^{"level"' || true
	# an election's leader: hers under a/, not under b
	echo "> alice elect -l b"
	timeout 2 etcdctl --endpoints "127.0.0.1:$port" --user alice:alicepw elect -l b 2>&1 |
		grep -v '^{"level"' || true
	echo "> alice elect -l a/e"
	timeout 2 etcdctl --endpoints "127.0.0.1:$port" --user alice:alicepw elect -l a/e 2>&1 |
		grep -v '^{"level"' || true
}

# token PORT USER PW: a token from the JSON gateway's Authenticate
token() {
	curl -s -m 5 "http://127.0.0.1:$1/v3/auth/authenticate" -d "{\"name\":\"$2\",\"password\":\"$3\"}" |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("token",""))'
}
# gwget PORT TOKEN: the JSON gateway's answer to a range of a/1 with TOKEN
gwget() {
	curl -s -m 5 -H "Authorization: $2" "http://127.0.0.1:$1/v3/kv/range" -d '{"key":"YS8x"}' |
		sed -e 's/"\(cluster_id\|member_id\|raft_term\|revision\|mod_revision\|create_revision\|version\)":"[0-9]*"/"\1":"N"/g'
}

it_cetcd_start c1 "$IT_TMP/c1" "$IT_TMP/cetcd1.log" --bcrypt-cost 6 --auth-token-ttl 2
it_etcd_start e1 "$IT_TMP/e1" "$IT_TMP/e1.log" "" --auth-token-ttl 2
check "cetcd answers" it_wait_healthy "$IT_CPORT" 30
check "etcd answers" it_wait_healthy "$IT_ETCD_PORT" 30

# part 1
it_same_on_both run_script
check "denials were among them" grep -q "Error: etcdserver: permission denied" \
	"$IT_TMP/cetcd.out"
check "and a canceled watch" grep -q "watch was canceled (rpc error: code = PermissionDenied" \
	"$IT_TMP/cetcd.out"
check "and allowed reads" grep -qx "v3" "$IT_TMP/cetcd.out"

# part 2: a simple token's TTL (2 s), through the JSON gateway
ttl_script() {
	local port=$1 t
	t=$(token "$port" alice alicepw)
	echo "> authenticate alice"
	echo "${t:+a simple token}"
	echo "> range a/1 with it"
	gwget "$port" "$t"
	echo
	echo "> range a/1 with not-a-token"
	gwget "$port" "not-a-token"
	echo
	sleep 3
	echo "> range a/1 with it after 3 s"
	gwget "$port" "$t"
	echo
}
it_same_on_both ttl_script
check "the expired token is refused as invalid" \
	test "$(tail -1 "$IT_TMP/cetcd.out")" = '{"error":"etcdserver: invalid auth token","message":"etcdserver: invalid auth token","code":16}'
check "cetcd stops" it_cetcd_stop
kill -TERM "$IT_ETCD_PID"
it_wait_gone "$IT_ETCD_PID" 15000 || kill -9 "$IT_ETCD_PID"

# part 3: client certificates and JWTs
pki=$IT_TMP/pki
mkdir -p "$pki"
cert() { it_mkcert "$pki" "$@"; }
cert ca "auth test ca" self
cert server server ca "subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth"
cert alice alice ca "extendedKeyUsage=clientAuth"
cert carol carol ca "extendedKeyUsage=clientAuth"
openssl genrsa -out "$pki/jwt.key" 2048 2>/dev/null
openssl rsa -in "$pki/jwt.key" -pubout -out "$pki/jwt.pub" 2>/dev/null
openssl genrsa -out "$pki/other.key" 2048 2>/dev/null
read -r IT_CPORT IT_PPORT < <(it_free_ports 2)
mkdir -p "$IT_RT/c2"
chmod 700 "$IT_RT/c2"
IT_CETCD_ARGS=(--name c2 --data-dir "$IT_TMP/c2" --runtime-dir "$IT_RT/c2"
	--listen-client-urls "https://127.0.0.1:$IT_CPORT"
	--advertise-client-urls "https://127.0.0.1:$IT_CPORT"
	--listen-peer-urls "http://127.0.0.1:$IT_PPORT"
	--initial-advertise-peer-urls "http://127.0.0.1:$IT_PPORT"
	--initial-cluster "c2=http://127.0.0.1:$IT_PPORT" --bcrypt-cost 6
	--cert-file "$pki/server.crt" --key-file "$pki/server.key"
	--trusted-ca-file "$pki/ca.crt" --client-cert-auth
	--auth-token "jwt,pub-key=$pki/jwt.pub,priv-key=$pki/jwt.key,sign-method=RS256,ttl=5m")
it_cetcd_restart "$IT_TMP/cetcd2.log"
tls() {
	local who=$1
	shift
	etcdctl --dial-timeout 2s --command-timeout 5s --endpoints "https://127.0.0.1:$IT_CPORT" \
		--cacert "$pki/ca.crt" --cert "$pki/$who.crt" --key "$pki/$who.key" "$@" </dev/null 2>&1 |
		grep -v '^{"level"' || true
}
up() { [[ $(tls alice endpoint health 2>&1) == *"is healthy"* ]]; }
check "cetcd with client TLS and JWT tokens answers" it_until 30000 up
for c in "user add root:rootpw" "user grant-role root root" "user add alice:alicepw" \
	"role add rp" "role grant-permission --prefix rp readwrite a/" "user grant-role alice rp" \
	"auth enable"; do
	# shellcheck disable=SC2086
	tls alice $c >>"$IT_TMP/setup3.out"
done
check "auth enabled over TLS" grep -q "Authentication Enabled" "$IT_TMP/setup3.out"
check "CN alice may put under a/" test "$(tls alice put a/1 v)" = "OK"
check "CN alice reads it" test "$(tls alice get a/1 --print-value-only)" = "v"
check "CN alice may not put x" test "$(tls alice put x v)" = "Error: etcdserver: permission denied"
check "CN carol is no user" test "$(tls carol get a/1)" = "Error: etcdserver: permission denied"
check "carol's certificate with root's password: root's token wins" \
	test "$(tls carol --user root:rootpw put x v)" = "OK"
check "alice's certificate with a wrong password is refused" \
	grep -q "authentication failed" <(tls alice --user root:wrong get x)
jwt=$(curl -s -m 5 --cacert "$pki/ca.crt" --cert "$pki/alice.crt" --key "$pki/alice.key" \
	"https://127.0.0.1:$IT_CPORT/v3/auth/authenticate" -d '{"name":"alice","password":"alicepw"}' |
	python3 -c 'import json,sys; print(json.load(sys.stdin).get("token",""))')
claims=$(cut -d. -f2 <<<"$jwt" | tr '_-' '/+' | base64 -d 2>/dev/null || true)
check "Authenticate gives a JWT naming alice" grep -q '"username":"alice"' <<<"$claims"
check "signed with the key made for it" bash -c "
	printf '%s' '${jwt%.*}' >'$IT_TMP/signed'
	printf '%s' '${jwt##*.}' | tr '_-' '/+' | sed -e 's/\$/==/' | base64 -d >'$IT_TMP/sig' 2>/dev/null
	openssl dgst -sha256 -verify '$pki/jwt.pub' -signature '$IT_TMP/sig' '$IT_TMP/signed' | grep -q OK"
# the same claims signed by another key
h64=$(cut -d. -f1 <<<"$jwt")
c64=$(cut -d. -f2 <<<"$jwt")
forged=$h64.$c64.$(printf '%s' "$h64.$c64" | openssl dgst -sha256 -sign "$pki/other.key" | base64 -w0 |
	tr '/+' '_-' | tr -d '=')
gw() {
	curl -s -m 5 --cacert "$pki/ca.crt" --cert "$pki/carol.crt" --key "$pki/carol.key" \
		-H "Authorization: $1" "https://127.0.0.1:$IT_CPORT/v3/kv/range" -d '{"key":"YS8x"}'
}
check "alice's JWT reads a/1 through the JSON gateway" grep -q '"value":"dg=="' <(gw "$jwt")
check "a JWT signed by another key is refused" \
	grep -q '"etcdserver: invalid auth token"' <(gw "$forged")
check "cetcd stops" it_cetcd_stop
it_summary
