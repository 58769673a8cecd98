#!/usr/bin/env bash
# JWTs between cetcd and other implementations (auth/jwt.c, through
# build/tests/jwttool):
#   - for every method, tokens cetcd signs verify with python3's
#     `cryptography` and tokens python signs verify with cetcd (RSA-PSS
#     with the hash-long salt golang-jwt signs with and the longest salt,
#     which golang-jwt also accepts), and a changed token is refused;
#   - Debian's etcd 3.4 started with --auth-token jwt,...: the token it
#     issues to Authenticate verifies with cetcd and names the user, and
#     etcd serves a request that carries a token cetcd signed with the
#     same key (and refuses one changed by a byte);
#   - cetcd starts with the same --auth-token, and a bad one stops both
#     etcd and cetcd with the same error.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcd
it_need_etcdctl
JWTTOOL=$IT_BUILD/tests/jwttool
[[ -x $JWTTOOL ]] || it_skip "$JWTTOOL is not built"
it_need_program openssl "to make keys"
python3 -c 'import cryptography' 2>/dev/null ||
	it_skip "python3's cryptography module is needed (Debian package python3-cryptography)"
it_init jwt_interop
K=$IT_TMP/keys
mkdir -p "$K"

openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$K/rsa.key" 2>/dev/null
openssl pkey -in "$K/rsa.key" -pubout -out "$K/rsa.pub"
for c in P-256:256 P-384:384 P-521:512; do
	openssl genpkey -algorithm EC -pkeyopt "ec_paramgen_curve:${c%%:*}" -out "$K/ec${c##*:}.key" 2>/dev/null
	openssl pkey -in "$K/ec${c##*:}.key" -pubout -out "$K/ec${c##*:}.pub"
done
printf 'a secret that both sides share' >"$K/hmac.secret"

# The key files of method $1: "PRIV PUB".
keys_of() {
	case $1 in
	RS* | PS*) echo "$K/rsa.key $K/rsa.pub" ;;
	ES256) echo "$K/ec256.key $K/ec256.pub" ;;
	ES384) echo "$K/ec384.key $K/ec384.pub" ;;
	ES512) echo "$K/ec512.key $K/ec512.pub" ;;
	HS*) echo "$K/hmac.secret $K/hmac.secret" ;;
	esac
}

cat >"$IT_TMP/pyjwt.py" <<'EOF'
# python3 pyjwt.py verify METHOD PUB TOKEN NOW  -> "USER REVISION EXP"
# python3 pyjwt.py sign METHOD PRIV USER REVISION EXP [SALT]
import base64, hmac, json, sys
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, utils

def b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
def b64e(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

op, method, keyfile = sys.argv[1:4]
h = {"256": hashes.SHA256(), "384": hashes.SHA384(), "512": hashes.SHA512()}[method[2:]]
raw = open(keyfile, "rb").read()
n = {"256": 32, "384": 48, "512": 66}[method[2:]]
if op == "verify":
    tok, now = sys.argv[4], int(sys.argv[5])
    head, body, sig = tok.split(".")
    data, sig = (head + "." + body).encode(), b64d(sig)
    assert json.loads(b64d(head))["alg"] == method
    if method.startswith("HS"):
        import hashlib
        mac = hmac.new(raw, data, getattr(hashlib, "sha" + method[2:])).digest()
        assert hmac.compare_digest(mac, sig), "bad mac"
    else:
        key = serialization.load_pem_public_key(raw)
        if method.startswith("RS"):
            key.verify(sig, data, padding.PKCS1v15(), h)
        elif method.startswith("PS"):
            key.verify(sig, data, padding.PSS(mgf=padding.MGF1(h), salt_length=h.digest_size), h)
        else:
            assert len(sig) == 2 * n
            der = utils.encode_dss_signature(int.from_bytes(sig[:n], "big"), int.from_bytes(sig[n:], "big"))
            key.verify(der, data, ec.ECDSA(h))
    claims = json.loads(b64d(body))
    assert sorted(claims) == ["exp", "revision", "username"], claims
    assert now <= claims["exp"], "expired"
    print(claims["username"], claims["revision"], claims["exp"])
else:
    user, rev, exp = sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
    head = b64e(json.dumps({"alg": method, "typ": "JWT"}, separators=(",", ":")).encode())
    body = b64e(json.dumps({"username": user, "revision": rev, "exp": exp}).encode())
    data = (head + "." + body).encode()
    if method.startswith("HS"):
        import hashlib
        sig = hmac.new(raw, data, getattr(hashlib, "sha" + method[2:])).digest()
    else:
        key = serialization.load_pem_private_key(raw, None)
        if method.startswith("RS"):
            sig = key.sign(data, padding.PKCS1v15(), h)
        elif method.startswith("PS"):
            salt = padding.PSS.MAX_LENGTH if sys.argv[7:] == ["max"] else h.digest_size
            sig = key.sign(data, padding.PSS(mgf=padding.MGF1(h), salt_length=salt), h)
        else:
            r, s = utils.decode_dss_signature(key.sign(data, ec.ECDSA(h)))
            sig = r.to_bytes(n, "big") + s.to_bytes(n, "big")
    print(head + "." + body + "." + b64e(sig))
EOF

now=$(date +%s)
exp=$((now + 300))
for m in RS256 RS384 RS512 PS256 PS384 PS512 ES256 ES384 ES512 HS256 HS384 HS512; do
	read -r priv pub < <(keys_of "$m")
	tok=$("$JWTTOOL" sign "$m" "$priv" "root<1>" 7 "$exp")
	check "$m: python verifies the token cetcd signed" \
		test "$(python3 "$IT_TMP/pyjwt.py" verify "$m" "$pub" "$tok" "$now" 2>&1)" == "root<1> 7 $exp"
	bad=${tok:0:20}$([[ ${tok:20:1} == A ]] && echo B || echo A)${tok:21}
	check "$m: python refuses it changed" \
		bash -c '! python3 "$1" verify "$2" "$3" "$4" "$5" >/dev/null 2>&1' _ "$IT_TMP/pyjwt.py" "$m" "$pub" "$bad" "$now"
	salts=(hash)
	[[ $m == PS* ]] && salts+=(max)
	for salt in "${salts[@]}"; do
		ptok=$(python3 "$IT_TMP/pyjwt.py" sign "$m" "$priv" alice 12 "$exp" "$salt")
		check "$m: cetcd verifies the token python signed (salt $salt)" \
			test "$("$JWTTOOL" verify "$m" "$pub" "$ptok" "$now")" == "alice 12 $exp"
	done
	check "$m: cetcd refuses a token python signed once it expired" \
		bash -c '! "$1" verify "$2" "$3" "$4" "$5" >/dev/null' _ "$JWTTOOL" "$m" "$pub" "$ptok" "$((exp + 1))"
done

# ---- beside Debian's etcd 3.4, with the RS256 key
spec="jwt,pub-key=$K/rsa.pub,priv-key=$K/rsa.key,sign-method=RS256,ttl=10m"
it_etcd_start e1 "$IT_TMP/etcd" "$IT_TMP/etcd.log" "" --auth-token "$spec"
it_member_answers "$IT_ETCD_PORT" "$IT_TMP/etcd.log" "etcd starts with --auth-token $spec"
EP=127.0.0.1:$IT_ETCD_PORT
etcdctl --endpoints "$EP" user add root:rootpw >/dev/null
etcdctl --endpoints "$EP" user grant-role root root >/dev/null
etcdctl --endpoints "$EP" auth enable >/dev/null
resp=$(curl -s "http://$EP/v3/auth/authenticate" -d '{"name":"root","password":"rootpw"}')
etok=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])' <<<"$resp")
read -r euser erev eexp < <("$JWTTOOL" verify RS256 "$K/rsa.pub" "$etok" "$(date +%s)")
check "cetcd verifies the token etcd issued: user root, exp about 10 minutes on" \
	test "$euser" == root -a "$eexp" -ge $((now + 590)) -a "$eexp" -le $(($(date +%s) + 600))
ctok=$("$JWTTOOL" sign RS256 "$K/rsa.key" root "$erev" $(($(date +%s) + 60)))
range() { curl -s "http://$EP/v3/kv/range" -H "Authorization: $1" -d '{"key":"Zm9v"}'; }
out=$(range "$ctok")
check "etcd serves a request with the token cetcd signed ($out)" \
	bash -c '[[ $1 == *\"header\"* && $1 != *error* ]]' _ "$out"
cbad=${ctok:0:30}$([[ ${ctok:30:1} == A ]] && echo B || echo A)${ctok:31}
out=$(range "$cbad")
check "etcd refuses it changed by a byte ($out)" bash -c '[[ $1 == *"invalid auth token"* ]]' _ "$out"

# ---- cetcd takes the same --auth-token; a bad one stops both alike
it_cetcd_start c1 "$IT_TMP/c1" "$IT_TMP/c1.log" --auth-token "$spec"
it_member_answers "$IT_CPORT" "$IT_TMP/c1.log" "cetcd starts with --auth-token $spec"
it_cetcd_stop || true
bad_spec="jwt,sign-method=RS256,pub-key=$K/ec256.pub"
read -r p1 p2 < <(it_free_ports 2)
rc=0
timeout 30 etcd --name e2 --data-dir "$IT_TMP/e2" --listen-client-urls "http://127.0.0.1:$p1" \
	--advertise-client-urls "http://127.0.0.1:$p1" --listen-peer-urls "http://127.0.0.1:$p2" \
	--initial-advertise-peer-urls "http://127.0.0.1:$p2" --initial-cluster "e2=http://127.0.0.1:$p2" \
	--auth-token "$bad_spec" >"$IT_TMP/e2.log" 2>&1 || rc=$?
etcd_err=$(grep -o ' C | etcdmain: .*' "$IT_TMP/e2.log" | tail -1)
etcd_err=${etcd_err# C | etcdmain: }
check "etcd refuses --auth-token $bad_spec (exit $rc: $etcd_err)" test "$rc" == 1 -a -n "$etcd_err"
rc=0
unset IT_CPORT IT_PPORT
it_cetcd_start c2 "$IT_TMP/c2" "$IT_TMP/c2.log" --auth-token "$bad_spec"
it_until 20000 it_gone "$IT_CETCD_PID" || true
wait "$IT_CETCD_PID" || rc=$?
check "cetcd refuses it too, exit 1, with etcd's error \"$etcd_err\"" \
	bash -c '[[ $1 == 1 ]] && grep -qF "\"msg\":\"$2\"" "$3"' _ "$rc" "$etcd_err" "$IT_TMP/c2.log"
it_summary
