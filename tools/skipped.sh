#!/usr/bin/env bash
# Lists the tests a ctest run skipped, each with the reason it printed.
#
#   tools/skipped.sh CTEST_OUTPUT BUILD_DIR
#
# CTEST_OUTPUT is what ctest printed (its "tests did not run" list names
# the skipped ones); BUILD_DIR/Testing/Temporary/LastTest.log holds each
# test's output, where a skipped test said why (the last line that says
# "skip", or else its last line). Prints "skipped: none" or "skipped:"
# and a line per test. Exits 0.
set -euo pipefail
out=$1
log=$2/Testing/Temporary/LastTest.log

mapfile -t names < <(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$out")
if ((${#names[@]} == 0)); then
	echo "skipped: none"
	exit 0
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
