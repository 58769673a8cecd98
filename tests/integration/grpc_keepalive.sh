#!/usr/bin/env bash
# --grpc-keepalive-min-time, --grpc-keepalive-interval and
# --grpc-keepalive-timeout, as grpc-go enforces and sends them in etcd 3.4,
# seen by a raw HTTP/2 client (tests/integration/h2ping.py):
#   - without a stream open, a client's PINGs after the first are early
#     (grpc-go allows one each 2 h then): the third early one gets GOAWAY
#     ENHANCE_YOUR_CALM (11) "too_many_pings" and the connection ends;
#   - with a gRPC stream open, PINGs 200 ms apart are early for a min time
#     of 1 s (GOAWAY, closed) and fine for one of 100 ms (all answered);
#   - with an interval of 1 s and a timeout of 1 s, a client that answers
#     no PING gets one and is closed about 2 s after it went silent, and
#     one that answers stays open; with the defaults (2 h, 20 s) a silent
#     client gets no PING.
# Debian's etcd 3.4 gives the same verdicts to the same client (when it is
# installed). Exits 77 when the programs or python3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_program python3

H2PING=$IT_SRC/tests/integration/h2ping.py
# run KIND NAME [flags...]: a fresh member of KIND (cetcd or etcd) on
# PORT, fails the test when it does not answer
PORT=
run() {
	local kind=$1 name=$2
	shift 2
	it_cl_init "$name" 3 "$name" # (member 0 alone runs)
	it_cl_start 0 "$kind" --initial-cluster "${name}0=$(it_cl_purl 0)" "$@"
	PORT=${IT_CL_CPORT[0]}
	it_member_answers "$PORT" "$(it_cl_log 0)" "$kind $name: the member answers" || exit 1
}
stop() { it_cl_stop 0; }
out() { python3 "$H2PING" "$PORT" "$@" 2>&1; }
calm() { grep -qx 'goaway 11 too_many_pings' <<<"$1" && ! grep -qx open <<<"$1"; }
# closed MIN MAX OUT: the server closed the connection MIN..MAX ms after
# the client's last frame
closed() {
	local ms
	ms=$(sed -n 's/^closed-after-ms //p' <<<"$3")
	[[ -n $ms ]] && ((ms >= $1 && ms <= $2))
}

verdicts() {
	local kind=$1 o
	run "$kind" "${kind}1" --grpc-keepalive-min-time=1s
	o=$(out flood 5)
	check "$kind: 5 PINGs without a stream: GOAWAY too_many_pings, closed" calm "$o"
	o=$(out stream 200 6)
	check "$kind: PINGs 200 ms apart on a stream, min time 1 s: GOAWAY too_many_pings" calm "$o"
	stop
	run "$kind" "${kind}2" --grpc-keepalive-min-time=100ms \
		--grpc-keepalive-interval=1s --grpc-keepalive-timeout=1s
	o=$(out stream 200 6)
	check "$kind: the same with a min time of 100 ms: all 6 answered, no GOAWAY, open" \
		eval 'grep -qx "pings-answered 6" <<<"$o" && ! grep -q goaway <<<"$o" && grep -qx open <<<"$o"'
	o=$(out silent 5)
	check "$kind: interval 1 s, timeout 1 s: a silent client gets a PING" \
		eval '! grep -qx "server-pings 0" <<<"$o"'
	check "$kind: and is closed 2 s after it went silent (1.5 to 3.5 s)" closed 1500 3500 "$o"
	o=$(out answer 4)
	check "$kind: a client that answers gets PINGs and stays open" \
		eval '! grep -qx "server-pings 0" <<<"$o" && grep -qx open <<<"$o"'
	stop
	run "$kind" "${kind}3"
	o=$(out silent 3)
	check "$kind: with the defaults a silent client gets no PING in 3 s" \
		eval 'grep -qx "server-pings 0" <<<"$o" && grep -qx open <<<"$o"'
	stop
}

# each kind is a part of its own (it_parts), the two at once: they share
# nothing, and each spends its time waiting on PINGs
if (($#)); then
	it_init "grpc-keepalive-$1"
	verdicts "$1"
	it_summary
	exit
fi
it_init grpc-keepalive
if command -v etcd >/dev/null; then
	it_parts cetcd etcd
else
	echo "  etcd is not installed: the comparison with etcd is skipped"
	it_parts cetcd
fi
it_summary
