#!/usr/bin/env bash
# The fault suite in short (tests/fault/run.sh): one of faultload's
# workloads (register, txn, watch, lock, lease: the seed picks it) for 50 s
# against a 3-member cetcd cluster in network namespaces of its own under
# every nemesis of the group all, and one time in three the membership
# ones too (the seed says), with a fresh seed, then the same against a mixed cluster
# (one Debian etcd 3.4 member, two cetcd members) when etcd is
# installed, then each seed of tests/fault/regressions.list again. Each run must find no anomaly,
# every member back and all agreeing. The seeds are printed: replay a
# failure with `tests/fault/run.sh -s SEED -c CLUSTER -f FAULTS -t SECS -w W`,
# and read its dir (faults.log, the history, the members' logs).
# Exits 77 without root, ip/tc, etcdctl, the programs, or Go with
# Debian's clientv3 (faultload is built from tests/tools/faultload).
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
[[ $(id -u) == 0 ]] || it_skip "network namespaces need root"
it_need_program ip "Debian package iproute2"
it_need_program tc "Debian package iproute2"
it_build_go_tool faultload go.etcd.io/etcd/clientv3
it_init fault_short
export FAULTLOAD=$IT_BUILD/tests/faultload
RUN=$IT_SRC/tests/fault/run.sh
SECS=${FAULT_SHORT_SECS:-50}

# fault_run LABEL run.sh's options...: one run, its line shown; a check
# that it passed (its exit status 0 and the line it printed says so);
# a failed run's dir is kept, its harness log's end shown.
n=0
fault_run() {
	local label=$1 dir line st=0
	shift
	n=$((n + 1))
	dir=$IT_TMP/run$n
	line=$(bash "$RUN" -o "$dir" "$@" 2>"$dir.err") || st=$?
	sed 's/^/  /' "$dir.err"
	echo "  $line"
	if ((st == 77)); then
		echo "  (skipped: $(tail -n 1 "$dir.err"))"
		return 0
	fi
	if ((st == 0)) && [[ $line == *" anomalies=0 lost=0 watch_gaps=0 watch_dups=0 double_holders=0 "* &&
		$line == *" converged=1 "* ]]; then
		ok "$label"
		# a search cut short is neither clean nor an anomaly: said, not failed
		[[ $line == *" unknown=0 "* ]] || echo "  (some keys' histories were not fully searched: unknown > 0)"
		rm -rf "$dir"
		return 0
	fi
	fail "$label (exit $st)"
	mkdir -p /tmp/cetcd-fault-failed
	cp -a "$dir" "/tmp/cetcd-fault-failed/${dir##*/}.$$" 2>/dev/null || true
	echo "  kept in /tmp/cetcd-fault-failed/${dir##*/}.$$; the harness's last lines:"
	tail -n 15 "$dir/harness.log" 2>/dev/null | sed 's/^/    /'
}

# faults SEED: FAULTS, the kinds a fresh run with SEED draws from
faults() {
	FAULTS=all
	(($1 / 4 % 3)) || FAULTS=all,member
}
workloads=(register txn watch lock lease)
# one_run CLUSTER: a run with a fresh seed on CLUSTER (cetcd or mixed)
one_run() {
	local seed w
	seed=$(it_fresh_seed)
	w=${workloads[seed % ${#workloads[@]}]}
	faults "$seed"
	echo "# $1, seed $seed, $w, $FAULTS"
	fault_run "$1: $SECS s of $w under $FAULTS, seed $seed: no anomaly, all members back and agreeing" \
		-s "$seed" -c "$1" -f "$FAULTS" -t "$SECS" -w "$w"
}
one_run cetcd
if command -v etcd >/dev/null; then
	one_run mixed
else
	echo "# no mixed run: etcd is not installed"
fi

# the regressions: SEED CLUSTER FAULTS SECONDS [WORKLOAD]
while read -r seed cluster faults secs workload; do
	[[ -z $seed || $seed == \#* ]] && continue
	if [[ $cluster != cetcd ]] && ! command -v etcd >/dev/null; then
		echo "# regression $seed: $cluster needs etcd, skipped"
		continue
	fi
	echo "# regression: seed $seed, $cluster, $faults, $secs s"
	fault_run "regression seed $seed ($cluster, $faults, $secs s) passes" \
		-s "$seed" -c "$cluster" -f "$faults" -t "$secs" -w "${workload:-register}"
done < <(sed 's/[[:space:]]*#.*//' "$IT_SRC/tests/fault/regressions.list")
it_summary
