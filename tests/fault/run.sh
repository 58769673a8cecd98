#!/usr/bin/env bash
# One run of the fault suite: a 3-member cluster (cetcd, mixed: one
# Debian etcd 3.4 member and two cetcd members, or etcd alone) in network
# namespaces of its own, faultload's workload against it for SECONDS
# while nemeses drawn from FAULTS break it (tests/fault/lib.sh says what
# each does), then every fault healed, a quiet end, and the checks:
# faultload's checkers over the history, every member answering and all
# of them agreeing on HashKV and revision.
#
# usage: tests/fault/run.sh [-t SECONDS] [-s SEED] [-f FAULT[,FAULT...]]
#            [-c cetcd|mixed|etcd] [-w WORKLOAD] [-o DIR]
#   -t  how long the workload runs (default 60); the nemeses stop at
#       4/5 of it (5 s before the end at least)
#   -s  the seed of every random choice of the harness, and faultload's;
#       a fresh one when not given (printed on stderr first)
#   -f  fault kinds, or the groups net, proc, all (default: every kind
#       but the membership and storage ones), member, storage, or none
#       (lib.sh's header describes each kind by group; -h prints the
#       groups)
#   -w  faultload's workload (default register)
#   -o  the run's directory (default a new /tmp/cetcd-fault.XXXXXX): the
#       history, faults.log, the members' logs and data, harness.log
# Prints one line on stdout, key=value pairs: seed cluster faults
# duration_s workload, faultload's ops anomalies lost watch_gaps
# watch_dups double_holders longest_unavail_ms unknown failovers, then
# recovery_ms_median (lib.sh's fn_recovery; -1 when no heal was followed
# by an acknowledged write through every endpoint), converged (1 when
# every member answers and all agree on HashKV and revision) and dir.
# Exit status:
# 0 clean; 1 an anomaly, a member that did not come back or members that
# disagree; 2 a setup error; 77 a missing tool (root, ip, tc, etcdctl,
# the programs, etcd for mixed and etcd, tests/tools/clockstep (cetcd
# members) or clockexec (etcd members) for clock,
# tests/tools/crashrevert for crash, unshare -m for full).
# FAULTLOAD=path runs that program instead of building tests/tools/faultload;
# FAULT_CETCD_FLAGS adds flags to every cetcd member (e.g.
# --unsafe-no-fsync, with which the crash kind fails a run).
source "$(dirname "$0")/lib.sh"

# inside the bridge's namespace the seed and the run's dir come from the
# outside run's environment (the options given may name neither)
FN_SECS=60 FN_FAULTS=all FN_CLUSTER=cetcd FN_WORKLOAD=register
FN_SEED=${FN_INSIDE:+$FN_SEED} FN_OUT=${FN_INSIDE:+$FN_OUT}
usage() {
	sed -n '/^# usage:/,/^# --unsafe-no-fsync/p' "$0" | sed 's/^# \{0,1\}//' >&2
	printf 'the groups of -f (lib.sh):\n  net: %s\n  proc: %s\n  all: %s\n  member: %s\n  storage: %s\n' \
		"$FN_KINDS_NET" "$FN_KINDS_PROC" "$FN_KINDS_ALL" "$FN_KINDS_MEMBER" "$FN_KINDS_STORAGE" >&2
	exit 2
}
while getopts "t:s:f:c:w:o:h" o; do
	case $o in
	t) FN_SECS=$OPTARG ;;
	s) FN_SEED=$OPTARG ;;
	f) FN_FAULTS=$OPTARG ;;
	c) FN_CLUSTER=$OPTARG ;;
	w) FN_WORKLOAD=$OPTARG ;;
	o) FN_OUT=$OPTARG ;;
	*) usage ;;
	esac
done
[[ $FN_SECS =~ ^[1-9][0-9]*$ ]] || usage
[[ -z $FN_SEED || $FN_SEED =~ ^[0-9]+$ ]] || usage
[[ $FN_CLUSTER =~ ^(cetcd|mixed|etcd)$ ]] || usage

# the kinds, one a word
FN_KINDS=
for k in ${FN_FAULTS//,/ }; do
	case $k in
	all) FN_KINDS+=" $FN_KINDS_ALL" ;;
	net) FN_KINDS+=" $FN_KINDS_NET" ;;
	proc) FN_KINDS+=" $FN_KINDS_PROC" ;;
	storage) FN_KINDS+=" $FN_KINDS_STORAGE" ;;
	member)
		# replace needs both kinds
		if [[ $FN_CLUSTER == mixed ]]; then
			FN_KINDS+=" $FN_KINDS_MEMBER"
		else
			FN_KINDS+=" ${FN_KINDS_MEMBER/ replace/}"
		fi
		;;
	none) ;;
	*)
		[[ " $FN_KINDS_ALL $FN_KINDS_STORAGE $FN_KINDS_MEMBER " == *" $k "* ]] ||
			{ echo "unknown fault kind: $k (kinds: $FN_KINDS_ALL $FN_KINDS_STORAGE $FN_KINDS_MEMBER)" >&2; exit 2; }
		FN_KINDS+=" $k"
		;;
	esac
done
FN_KINDS=${FN_KINDS# }

# ------------------------------------------------------------ outside
if [[ -z ${FN_INSIDE:-} ]]; then
	[[ $(id -u) == 0 ]] || it_skip "network namespaces need root"
	it_need_program ip "Debian package iproute2"
	it_need_program tc "Debian package iproute2"
	it_need_etcdctl
	[[ $FN_CLUSTER == etcd ]] || it_need_cetcd
	[[ $FN_CLUSTER == cetcd ]] || it_need_etcd
	[[ " $FN_KINDS " != *" clock "* || $FN_CLUSTER == etcd || -f $FN_CLOCKSTEP ]] ||
		it_skip "$FN_CLOCKSTEP is not built"
	[[ " $FN_KINDS " != *" clock "* || $FN_CLUSTER == cetcd || -x $FN_CLOCKEXEC ]] ||
		it_skip "$FN_CLOCKEXEC is not built"
	[[ " $FN_KINDS " != *" crash "* || -x $FN_CRASHREVERT ]] ||
		it_skip "$FN_CRASHREVERT is not built"
	# full mounts a tmpfs a member: in a mount namespace of the run's own
	[[ " $FN_KINDS " != *" full "* ]] || it_mount_ns "the fault kind full" "$@"
	if [[ -z ${FAULTLOAD:-} ]]; then
		it_build_go_tool faultload go.etcd.io/etcd/clientv3 >&2
		FAULTLOAD=$IT_BUILD/tests/faultload
	fi
	[[ -n $FN_SEED ]] || FN_SEED=$(it_fresh_seed)
	if [[ -z $FN_OUT ]]; then
		FN_OUT=$(mktemp -d /tmp/cetcd-fault.XXXXXX)
	else
		mkdir -p "$FN_OUT"
	fi
	FN_OUT=$(cd "$FN_OUT" && pwd)
	echo "fault run: seed=$FN_SEED cluster=$FN_CLUSTER faults=${FN_FAULTS} t=${FN_SECS}s dir=$FN_OUT" >&2
	# the namespaces' names: random, not the pid, which is the same (1)
	# in every run made in a PID namespace of its own
	FN_TAG=$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
	fn_net_names "$FN_TAG"
	inner=
	trap 'fn_net_down' EXIT
	# an interrupted run stops the harness inside, which stops its own
	trap '[[ -n $inner ]] && kill -TERM "$inner" 2>/dev/null' INT TERM
	fn_net_up
	ip netns exec "$FN_BR" env FN_INSIDE=1 FN_TAG="$FN_TAG" FN_SEED="$FN_SEED" FN_OUT="$FN_OUT" FAULTLOAD="$FAULTLOAD" \
		bash "$0" "$@" >"$FN_OUT/harness.log" 2>&1 &
	inner=$!
	st=
	while [[ -z $st ]]; do
		wait "$inner" && st=0 || { st=$?; it_gone "$inner" || st=; }
	done
	cat "$FN_OUT/run.line" 2>/dev/null || { echo "no run line: see $FN_OUT/harness.log" >&2; ((st)) || st=2; }
	exit "$st"
fi

# ------------------------------------------------------------ inside the bridge's namespace
[[ -d $FN_OUT && -n $FN_SEED ]] || { echo "fault run: no run dir or seed inside" >&2; exit 2; }
IT_TMP=$FN_OUT
IT_RT=$(mktemp -d /dev/shm/cetcd-fault.XXXXXX)
IT_KEEP=1
# faultload first, given time to check what it recorded (an interrupted
# run's history is still read), then the rest
fn_inner_exit() {
	local rc=$?
	set +e
	if [[ -n ${fl:-} ]] && ! it_gone "$fl"; then
		kill -TERM "$fl" 2>/dev/null
		it_wait_gone "$fl" 30000
	fi
	# it_cleanup reads the exit status from $?
	(exit "$rc")
	it_cleanup
	rm -rf "$IT_RT"
}
trap fn_inner_exit EXIT
trap 'exit 143' TERM INT
set -E
trap 'it_err_at=${BASH_SOURCE[0]##*/}:$LINENO' ERR
fn_net_names "$FN_TAG"
fn_seed "$FN_SEED"
: >"$FN_OUT/faults.log"

case $FN_CLUSTER in
cetcd) kinds=(cetcd cetcd cetcd) ;;
etcd) kinds=(etcd etcd etcd) ;;
mixed)
	kinds=(cetcd cetcd cetcd)
	fn_rand 3
	kinds[FN_R]=etcd
	;;
esac
fn_cluster_init "${kinds[@]}" "$FN_KINDS"
echo "# members: ${kinds[*]} at $(it_cl_ep 0) $(it_cl_ep 1) $(it_cl_ep 2); faults: ${FN_KINDS:-none}"
for i in 0 1 2; do fn_start "$i"; done
for i in 0 1 2; do
	it_cl_answers "$i" || { echo "setup: member $(fn_name "$i") does not answer"; exit 2; }
done
fn_ids
eps=
for i in 0 1 2; do eps+="${eps:+,}http://$(it_cl_ep "$i")"; done

t0=$(it_now_ms)
"$FAULTLOAD" -endpoints "$eps" -workload "$FN_WORKLOAD" -seed "$FN_SEED" -duration "${FN_SECS}s" \
	-out "$FN_OUT" >"$FN_OUT/faultload.out" 2>"$FN_OUT/faultload.err" &
fl=$!
it_track "$fl"
settle=$((FN_SECS / 5 > 5 ? FN_SECS / 5 : 5))
sleep 2
if [[ -n $FN_KINDS ]]; then
	fn_nemesis "$FN_KINDS" $((t0 + (FN_SECS - settle) * 1000))
fi
fn_heal
echo "# nemeses done at $((($(it_now_ms) - t0) / 1000)) s (members: ${FN_KIND[*]}); waiting for faultload"
if ! it_until $(((FN_SECS + 90) * 1000 - ($(it_now_ms) - t0))) it_gone "$fl"; then
	echo "faultload still runs $((FN_SECS + 90)) s after its start: SIGTERM"
	kill -TERM "$fl" 2>/dev/null || true
fi
fl_st=0
wait "$fl" || fl_st=$?
line=$(tail -n 1 "$FN_OUT/faultload.out" 2>/dev/null || true)
echo "faultload (exit $fl_st): $line"

back=1
for i in 0 1 2; do
	it_wait_healthy "$(it_cl_ep "$i")" 30 || { echo "FAIL: member $(fn_name "$i") does not answer after the faults"; back=0; }
done
converged=0
eps_hp=()
for i in 0 1 2; do eps_hp+=("$(it_cl_ep "$i")"); done
if it_agreed 30000 it_same_hashkv "${eps_hp[@]}"; then
	converged=1
else
	echo "FAIL: the members do not agree on HashKV and revision"
fi
((back)) || converged=0
rec=$(fn_recovery "$FN_OUT/faults.log" "$FN_OUT/$FN_WORKLOAD.jsonl")

out="seed=$FN_SEED cluster=$FN_CLUSTER faults=${FN_FAULTS} duration_s=$FN_SECS workload=$FN_WORKLOAD"
for f in ops anomalies lost watch_gaps watch_dups double_holders longest_unavail_ms unknown failovers; do
	out+=" $f=$(fn_field "$line" "$f")"
done
out+=" recovery_ms_median=$rec converged=$converged dir=$FN_OUT"
echo "$out" >"$FN_OUT/run.line"
echo "$out"
[[ -z ${FN_BROKEN:-} ]] || echo "FAIL: $FN_BROKEN"
# the verdict is this line's (it_cleanup has no summary to wait for)
it_summarized=1
if [[ $(fn_field "$line" ops) == "?" ]] || ((fl_st >= 2)); then
	exit 2
fi
if ((fl_st == 0 && converged == 1)) && [[ -z ${FN_BROKEN:-} ]]; then
	exit 0
fi
exit 1
