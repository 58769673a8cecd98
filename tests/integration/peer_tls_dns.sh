#!/usr/bin/env bash
# A dead resolver does not stall raftd. With --peer-client-cert-auth, a
# client certificate whose SANs are DNS names only is checked by looking
# the names up (etcd's checkCertSAN); raftd does those lookups off its
# event loop. The test runs in a network and mount namespace of its own,
# with its own /etc/hosts, nsswitch.conf and resolv.conf, whose name
# server (a UDP socket here) swallows every query:
#   - a 3-member cetcd cluster on https peer URLs (IP SAN certificates,
#     client cert auth) elects a leader;
#   - 70 TLS clients whose certificate names only slow.test (a name only
#     DNS could answer) open peer connections to the leader at once; none
#     is answered, the leader refuses them after the lookups fail (and
#     refuses the ones beyond its 64 running lookups at once), while the
#     cluster keeps its leader and term and takes every put through every
#     member;
#   - a client whose certificate names member.test (in this /etc/hosts,
#     127.0.0.1) is answered: the check that waits for a lookup passes.
# Exits 77 when not root (the namespaces need it), or when the programs,
# unshare, ip, etcdctl, python3 or openssl are missing.
source "$(dirname "$0")/lib.sh"

if [[ ${CETCD_DNS_NS:-} != 1 ]]; then
	it_need_cetcd
	it_need_etcdctl
	[[ $(id -u) == 0 ]] || it_skip "network and mount namespaces of the test's own need root"
	for t in unshare ip openssl python3; do
		it_need_program "$t"
	done
	export CETCD_DNS_NS=1
	exec unshare --net --mount --propagation private -- bash "$0" "$@"
fi
ip link set lo up
it_init peer-tls-dns

# ------------------------------------------------------------ the resolver
cat >"$IT_TMP/hosts" <<'EOF'
127.0.0.1 localhost
127.0.0.1 member.test
EOF
printf 'hosts: files dns\n' >"$IT_TMP/nsswitch.conf"
printf 'nameserver 127.0.0.53\noptions timeout:2 attempts:2\n' >"$IT_TMP/resolv.conf"
for f in hosts nsswitch.conf resolv.conf; do
	mount --bind "$IT_TMP/$f" "/etc/$f"
done
# the name server that never answers: it logs each query's name
it_dns_start "$IT_TMP/blackhole.log"
t0=$(it_now_ms)
check "the namespace's resolver does not answer slow.test" bash -c '! getent ahosts slow.test'
took=$(($(it_now_ms) - t0))
check "and a lookup waits on it (${took} ms)" [ "$took" -ge 2000 ]
check "the name server saw the query" grep -q '^query slow.test' "$IT_TMP/blackhole.log"
check "member.test resolves from this hosts file" bash -c 'getent ahosts member.test | grep -q 127.0.0.1'

# ------------------------------------------------------------ certificates
pki=$IT_TMP/pki
mkdir -p "$pki"
mkcert() { it_mkcert "$pki" "$@"; }
mkcert ca "test ca" self
mkcert member member ca "subjectAltName=IP:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
mkcert slow slow ca "subjectAltName=DNS:slow.test
extendedKeyUsage=clientAuth"
mkcert named named ca "subjectAltName=DNS:member.test
extendedKeyUsage=clientAuth"

# ------------------------------------------------------------ the cluster
it_cl_init dns 3 dns
initial=""
for i in 0 1 2; do initial+="${initial:+,}${IT_CL_NAMES[i]}=https://127.0.0.1:${IT_CL_PPORT[i]}"; done
for i in 0 1 2; do
	stem=${IT_CL_NAMES[i]}
	mkdir -p "$IT_RT/$stem"
	chmod 700 "$IT_RT/$stem"
	"$IT_BIN/cetcd" --name "$stem" --data-dir "$IT_TMP/$stem" --runtime-dir "$IT_RT/$stem" \
		--listen-client-urls "http://$(it_cl_ep "$i")" --advertise-client-urls "http://$(it_cl_ep "$i")" \
		--listen-peer-urls "https://127.0.0.1:${IT_CL_PPORT[i]}" \
		--initial-advertise-peer-urls "https://127.0.0.1:${IT_CL_PPORT[i]}" \
		--initial-cluster "$initial" --initial-cluster-token dns \
		--peer-cert-file "$pki/member.crt" --peer-key-file "$pki/member.key" \
		--peer-trusted-ca-file "$pki/ca.crt" --peer-client-cert-auth 2>>"${IT_CL_LOG[i]}" >&2 &
	IT_CL_PIDS[i]=$!
	it_track "${IT_CL_PIDS[i]}"
done
for i in 0 1 2; do it_cl_answers "$i" || { it_summary; exit 1; }; done
ok "three members on TLS peer links with client cert auth answer"
lead=$(it_cl_current_leader)
term() { it_status "$(it_cl_ep "$1")" 'd["raftTerm"]'; }
leader_id() { it_status "$(it_cl_ep "$1")" '"%x" % d["leader"]'; }
term0=$(term "$lead")
leader0=$(leader_id "$lead")
echo "# leader ${IT_CL_NAMES[lead]} ($leader0), term $term0"

# ------------------------------------------------------------ the flood
cat >"$IT_TMP/clients.py" <<'EOF'
import socket, ssl, sys, time
port, cert, key, n, wait = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.load_cert_chain(cert, key)
conns = []
for _ in range(n):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10))
    s.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
    s.setblocking(False)
    conns.append([s, b"", False])
print("opened", len(conns), flush=True)
end = time.time() + wait
while time.time() < end and any(not c[2] for c in conns):
    for c in conns:
        if c[2]:
            continue
        try:
            d = c[0].recv(4096)
            if d:
                c[1] += d
            # answered, or closed by the server
            c[2] = not d or b"etcdserver" in c[1]
        except (ssl.SSLWantReadError, BlockingIOError):
            pass
        except (ssl.SSLError, OSError):
            c[2] = True
    time.sleep(0.05)
answered = sum(b"etcdserver" in c[1] for c in conns)
print("answered", answered, "of", len(conns), flush=True)
EOF
python3 "$IT_TMP/clients.py" "${IT_CL_PPORT[lead]}" "$pki/slow.crt" "$pki/slow.key" 70 15 \
	>"$IT_TMP/slow.out" 2>&1 &
flood=$!
it_track "$flood"
it_until 10000 grep -q '^opened 70' "$IT_TMP/slow.out" ||
	fail "70 TLS clients with the DNS-named certificate connect ($(cat "$IT_TMP/slow.out"))"
# puts through every member while the leader's lookups wait on the resolver
puts=0 failed=0
t0=$(it_now_ms)
while (($(it_now_ms) - t0 < 10000)); do
	for i in 0 1 2; do
		if etcdctl --endpoints "$(it_cl_ep "$i")" --command-timeout 3s put "k$puts" "v$puts" >/dev/null 2>>"$IT_TMP/put.err"; then
			:
		else
			failed=$((failed + 1))
		fi
		puts=$((puts + 1))
	done
done
check "every put through every member succeeds while the lookups hang ($((puts - failed)) of $puts)" [ "$failed" = 0 ]
wait "$flood" || true
check "no DNS-named client is answered ($(cat "$IT_TMP/slow.out" | tail -1))" grep -q '^answered 0 ' "$IT_TMP/slow.out"
check "the leader's raftd looked the name up" \
	bash -c '(( $(grep -c "^query slow.test" "$1") > 2 ))' _ "$IT_TMP/blackhole.log"
llog=${IT_CL_LOG[lead]}
check "the leader refuses them once the lookups fail" \
	it_wait_log "$llog" 'rejected connection.*does not match any of DNSNames \[\\"slow.test\\"\]' 20
check "and refuses those beyond 64 running lookups" \
	it_log_has "$llog" 'rejected connection.*lookups of client addresses are already running' 1
for i in 0 1 2; do
	check "member ${IT_CL_NAMES[i]} keeps term $term0" [ "$(term "$i")" = "$term0" ]
	check "member ${IT_CL_NAMES[i]} keeps leader $leader0" [ "$(leader_id "$i")" = "$leader0" ]
done
# each member logs the election it saw: all at the first term
terms=$(grep -ho '"msg":"raft.node:[^"]*elected leader [^"]*' "${IT_CL_LOG[@]}" |
	sed 's/.* at term //' | sort -u | tr '\n' ' ')
check "the only election is the first one (terms elected: $terms)" [ "$terms" = "$term0 " ]

# ------------------------------------------------------------ a name the hosts file has
python3 "$IT_TMP/clients.py" "${IT_CL_PPORT[lead]}" "$pki/named.crt" "$pki/named.key" 1 20 \
	>"$IT_TMP/named.out" 2>&1 || true
check "a client whose certificate names member.test is answered ($(tail -1 "$IT_TMP/named.out"))" \
	grep -q '^answered 1 ' "$IT_TMP/named.out"

it_cl_stop 0 1 2
it_summary
