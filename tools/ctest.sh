#!/usr/bin/env bash
# Runs ctest in the current directory (a build directory) with the
# arguments given, then lists the tests it skipped, each with the reason
# it printed; exits with ctest's status.
#
#   tools/ctest.sh CTEST_ARGS...
#
# ctest's "tests did not run" list names the skipped ones;
# Testing/Temporary/LastTest.log holds each test's output, where a
# skipped test said why (the last line that says "skip", or else its
# last line). Prints "skipped: none" or "skipped:" and a line per test.
set -euo pipefail
out=ctest.out
log=Testing/Temporary/LastTest.log

st=0
ctest "$@" 2>&1 | tee "$out" || st=$?

mapfile -t names < <(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$out")
if ((${#names[@]} == 0)); then
	echo "skipped: none"
	exit "$st"
fi
echo "skipped:"
for name in "${names[@]}"; do
	reason=$(awk -v t="$name" '
		$0 ~ "^[0-9]+/[0-9]+ Test: " && $NF == t { inside = 1; out = 0; next }
		inside && /^Output:$/ { out = 1; getline; next }
		inside && out && /^<end of output>$/ { exit }
		inside && out && NF { last = $0; if (tolower($0) ~ /skip/) said = $0 }
		END { print (said != "" ? said : (last != "" ? last : "(it printed no reason)")) }
	' "$log" 2>/dev/null) || reason="(no output in $log)"
	echo "  $name: $reason"
done
exit "$st"
