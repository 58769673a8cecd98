#!/bin/bash
# Differential check of the permission cache: random permissions of one
# user and random checks, decided by cetcd (perm_diff, C: auth/perm.h) and
# by etcd 3.4's own interval tree (tests/tools/permdiff, built from
# Debian's golang-etcd-server-dev), as its auth store merges and checks
# them. They must agree on every check where the permissions are all
# well-formed and the range is not inverted; elsewhere etcd's red-black
# tree may answer by its shape (a node of an inverted permission misleads
# a search), and the disagreements there are counted, not failed.
# Seeded (CETCD_TEST_SEED=<n> repeats a run; PERM_DIFF_COUNT sets the
# number of cases); exits 77 when go or etcd's Go sources are missing.
source "$(dirname "$0")/../integration/lib.sh"

gen=${PERM_DIFF:?PERM_DIFF names the perm_diff program}
seed=${CETCD_TEST_SEED:-$(( ($(date +%s%N) / 1000) % 4294967296 ))}
count=${PERM_DIFF_COUNT:-20000}

it_build_go_tool permdiff go.etcd.io/etcd/pkg/adt
work=$(mktemp -d "${TMPDIR:-/tmp}/cetcd-permdiff-XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "perm_diff: seed $seed, $count cases of 16 checks"
"$gen" "$seed" "$count" "$work/cases" "$work/c"
"$IT_BUILD/tests/permdiff" <"$work/cases" >"$work/go"
paste -d ' ' "$work/go" "$work/c" | awk '
	{ for (i = 1; i <= length($1); i++) {
		m = substr($3, i, 1); e = substr($1, i, 1); c = substr($2, i, 1)
		n[m]++; ones += e == "1"
		if (e == c) continue
		if (m != "p") { shape[m]++; stricter[m] += e == "0"; continue }
		bad++
		if (bad <= 10) printf "case %d check %d: etcd %s, cetcd %s\n", NR, i, e, c
	} }
	END {
		printf "%d checks (%d permitted by etcd): %d with well-formed permissions and ranges, all alike\n", n["p"] + n["i"] + n["m"], ones, n["p"]
		printf "by the tree'"'"'s shape: %d of %d inverted ranges differ (%d where etcd refuses), %d of %d checks under a permission that is not well-formed (%d where etcd refuses)\n", shape["i"], n["i"], stricter["i"], shape["m"], n["m"], stricter["m"]
		exit bad > 0
	}' || {
	echo "FAIL: cetcd and etcd disagree (seed $seed; CETCD_TEST_SEED=$seed repeats it)"
	exit 1
}
echo "ok"
