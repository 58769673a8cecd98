#!/usr/bin/env bash
# --cors and --host-whitelist, as etcd 3.4's access controller applies
# them to the client port's HTTP/1.1 (embed/serve.go): requests made with
# curl to cetcd and, side by side, to Debian's etcd 3.4 with the same flags
# get the same status, Access-Control-Allow-Origin and body:
#   - the defaults (--cors=*, --host-whitelist=*): every answer carries
#     Access-Control-Allow-Origin: *, OPTIONS is answered 200;
#   - --cors=http://allowed.example:8080 --host-whitelist=127.0.0.1,localhost:
#     a Host not listed is answered 421 with etcd's text (and the warning
#     logged), a listed one served; the origin is echoed only when listed;
#     OPTIONS answered 200; over TLS (--auto-tls) any Host is served; gRPC
#     (etcdctl) is not concerned.
# Without etcd the expected values are checked alone. Exits 77 when the
# programs, etcdctl or curl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_need_program curl
it_init http-access

# ask PORT [curl args...]: status, the Access-Control-Allow-Origin value
# ("-" when absent) and the body, on one line each (the body's lines after)
ask() {
	local port=$1 out hdr
	shift
	hdr=$IT_TMP/hdr.$RANDOM
	out=$(curl -sk -D "$hdr" "$@" "http://127.0.0.1:$port/health" 2>/dev/null) || true
	sed -n '1s/^HTTP\/1.1 \([0-9]*\).*/\1/p' "$hdr"
	{ grep -i '^Access-Control-Allow-Origin:' "$hdr" || echo "x: -"; } | head -1 | sed 's/^[^:]*: //' | tr -d '\r'
	[[ $(sed -n '1s/^HTTP\/1.1 \([0-9]*\).*/\1/p' "$hdr") == 200 ]] || printf '%s\n' "$out"
}
# the same for an OPTIONS request to /anything
ask_options() {
	local port=$1
	shift
	curl -sk -o /dev/null -D - -X OPTIONS "$@" "http://127.0.0.1:$port/anything" 2>/dev/null |
		grep -iE '^(HTTP/1.1|Access-Control-Allow-Origin:|Content-Length:)' | tr -d '\r' |
		sed 's/^\(HTTP\/1.1 [0-9]*\).*/\1/' | sort
}

# start KIND NAME [flags...]: a member of KIND on fresh ports; PORT is its
# client port, TPORT its https one (with --auto-tls)
start() {
	local kind=$1 name=$2
	shift 2
	it_cl_init "$name" 3 "$name" # (member 0 alone runs)
	read -r TPORT < <(it_free_ports 1)
	PORT=${IT_CL_CPORT[0]}
	it_cl_start 0 "$kind" --initial-cluster "${name}0=$(it_cl_purl 0)" --auto-tls \
		--listen-client-urls "http://127.0.0.1:$PORT,https://127.0.0.1:$TPORT" "$@"
	it_until 30000 etcdctl --endpoints "127.0.0.1:$PORT" --dial-timeout 1s --command-timeout 2s \
		endpoint health >/dev/null 2>&1 || { fail "$kind $name answers"; it_summary; exit 1; }
}
stop() { it_cl_stop 0; }

# answers KIND: every request of the scenario, in order, into IT_TMP/KIND.*
answers() {
	local kind=$1
	start "$kind" "${kind}d"
	{
		echo "# defaults"; ask "$PORT"; ask "$PORT" -H 'Origin: http://x.example'
		ask "$PORT" -H 'Host: evil.example:1'; ask_options "$PORT"
	} >"$IT_TMP/$kind.defaults"
	stop
	start "$kind" "${kind}w" --cors=http://allowed.example:8080 --host-whitelist=127.0.0.1,localhost
	{
		echo "# listed host, no origin"; ask "$PORT"
		echo "# listed origin"; ask "$PORT" -H 'Origin: http://allowed.example:8080'
		echo "# other origin"; ask "$PORT" -H 'Origin: http://other.example'
		echo "# localhost"; ask "$PORT" -H "Host: localhost:$PORT"
		echo "# host not listed"; ask "$PORT" -H 'Host: evil.example:2379'
		echo "# bare host not listed"; ask "$PORT" -H 'Host: evil.example'
		echo "# options, listed origin"; ask_options "$PORT" -H 'Origin: http://allowed.example:8080'
	} >"$IT_TMP/$kind.limited"
	curl -sk -o /dev/null -w '%{http_code}\n' -H 'Host: evil.example' \
		"https://127.0.0.1:$TPORT/health" >"$IT_TMP/$kind.tls"
	etcdctl --endpoints "127.0.0.1:$PORT" put k v >"$IT_TMP/$kind.grpc" 2>&1 || true
	stop
}

answers cetcd
c=$IT_TMP/cetcd
check "defaults: Access-Control-Allow-Origin: * on /health" \
	eval '[[ $(sed -n 2,3p $c.defaults) == $'"'"'200\n*'"'"' ]]'
check "defaults: any Host is served" eval 'grep -c "^200$" $c.defaults | grep -qx 3'
check "defaults: OPTIONS is answered 200 with no body" \
	eval 'grep -qx "HTTP/1.1 200" $c.defaults && grep -qix "Content-Length: 0" $c.defaults'
check "whitelist: a Host not listed gets 421" eval '[[ $(grep -c "^421$" $c.limited) == 2 ]]'
check "whitelist: with etcd's text naming the host" \
	grep -q 'etcd --host-whitelist "evil.example"' "$c.limited"
check "whitelist: and the warning is logged" \
	grep -q '"msg":"rejecting HTTP request to prevent DNS rebinding attacks","host":"evil.example"' "$IT_TMP/cetcdw0.log"
check "cors: a listed origin is echoed" \
	eval 'sed -n "/# listed origin/,/#/p" $c.limited | grep -qx "http://allowed.example:8080"'
check "cors: another gets no Access-Control-Allow-Origin" \
	eval 'sed -n "/# other origin/,/# localhost/p" $c.limited | grep -qx -- "-"'
check "over TLS any Host is served" grep -qx 200 "$c.tls"
check "gRPC is not concerned" grep -qx OK "$c.grpc"
if command -v etcd >/dev/null; then
	answers etcd
	for f in defaults limited tls grpc; do
		if diff "$IT_TMP/etcd.$f" "$c.$f" >"$IT_TMP/$f.diff"; then
			ok "etcd 3.4 answers the same ($f: $(wc -l <"$c.$f") lines)"
		else
			fail "etcd 3.4 answers the same ($f)"
			sed 's/^/    /' "$IT_TMP/$f.diff" | head -20
		fi
	done
else
	echo "  etcd is not installed: the comparison with etcd is skipped"
fi
it_summary
