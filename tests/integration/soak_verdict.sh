#!/usr/bin/env bash
# The soak's verdict (tests/fault/soak.sh -j; its header states the
# rule) on crafted samples of an hour of a 3-member cetcd cluster (every
# 15 s; each process's memory, descriptors and region wobbling by a few
# per cent, raftd's memory a sawtooth of 2 minutes between half and one
# and a half of its level, a lone sample at three times it): flat ones
# pass, also with 3 more descriptors than 20; a stored whose RSS grows
# by 1% a minute, a gateway with 6 more descriptors, a region that
# shrinks by half, a daemon that restarts under faults that restart
# nothing (slowdisk, move-leader among them: under kill, crash or the
# group storage it passes), and a leak hidden by restarts every 4
# minutes under faults that do, each fail, naming the series. No process
# is started. Exits 77 without python3.
source "$(dirname "$0")/lib.sh"
it_need_program python3 "to craft the samples, and soak.sh's verdict"
it_init soak_verdict
SOAK=$IT_SRC/tests/fault/soak.sh

# craft CSV CASE: an hour of samples, CASE says what goes wrong
craft() {
	python3 - "$@" <<'EOF'
import random, sys
out, case = sys.argv[1], sys.argv[2]
rnd = random.Random(7)
base = {"cetcd": (3000, 2000, 12), "raftd": (30000, 20000, 20), "stored": (60000, 40000, 20),
        "gatewayd-0": (40000, 25000, 20)}
pid = {}
n = 100
for m in ("m0", "m1", "m2"):
    for d in base:
        n += 1
        pid[(m, d)] = [(0, n)]  # (born at t, pid)
with open(out, "w") as f:
    f.write("t_s,member,daemon,pid,age_s,rss_kb,pss_kb,fds,tmpfs_kb\n")
    for t in range(0, 3600, 15):
        for m in ("m0", "m1", "m2"):
            for d, (rss, pss, fds) in base.items():
                lives = pid[(m, d)]
                if case == "restart" and (m, d) == ("m2", "raftd") and t == 1800:
                    n += 1
                    lives.append((t, n))
                if case == "hidden" and (m, d) == ("m0", "stored") and t and t % 240 == 0:
                    n += 1
                    lives.append((t, n))
                born, p = lives[-1]
                age = t - born + 5
                w = lambda v: int(v * (1 + rnd.uniform(-0.03, 0.03)))
                r, s, fd = w(rss), w(pss), fds + rnd.choice((0, 0, 1))
                if d == "raftd":
                    saw = 0.5 + (t % 120) / 120.0
                    r, s = int(r * saw), int(s * saw)
                if t == 2000:
                    r *= 3
                if case == "leak" and (m, d) == ("m1", "stored") and t >= 300:
                    r += int(rss * 0.01 * (t - 300) / 60)
                if case == "hidden" and (m, d) == ("m0", "stored"):
                    r += int(rss * 0.01 * (age - 5) / 60)
                if case in ("fds3", "fds6") and (m, d) == ("m0", "gatewayd-0") and t >= 1200:
                    fd += 3 if case == "fds3" else 6
                tm = ""
                if d == "cetcd":
                    tm = w(4000)
                    if case == "shrink" and m == "m2" and t >= 2400:
                        tm //= 2
                f.write("%d,%s,%s,%d,%d,%d,%d,%d,%s\n" % (t, m, d, p, age, r, s, fd, tm))
EOF
}

# judged CASE STATUS PATTERN [soak.sh options...]: soak.sh -j on CASE's
# CSV exits STATUS and its output matches PATTERN (a grep -E).
judged() {
	local case=$1 want=$2 pat=$3 st=0
	shift 3
	craft "$IT_TMP/$case.csv" "$case"
	bash "$SOAK" -j "$IT_TMP/$case.csv" "$@" >"$IT_TMP/$case.out" 2>&1 || st=$?
	if ((st == want)) && grep -Eq -- "$pat" "$IT_TMP/$case.out"; then
		ok "$case${*:+ ($*)}: exit $st, $(grep -E -- "$pat" "$IT_TMP/$case.out" | head -n 1)"
	else
		fail "$case${*:+ ($*)}: exit $st (want $want), output wanted: $pat"
		sed 's/^/  /' "$IT_TMP/$case.out"
	fi
}

judged flat 0 '^flat=1$'
judged fds3 0 '^flat=1$'
judged leak 1 '^not flat: m1 stored rss_kb pid [0-9]+: level [0-9.]+ \(at 300-600 s of age\), [0-9.]+ at 3[0-9]{3}-3[0-9]{3} s \(\+[3-5][0-9]\.[0-9]%'
judged leak 1 '^flat=0$'
judged fds6 1 '^not flat: m0 gatewayd-0 fds pid [0-9]+: level 21 .*, 27 at '
judged shrink 1 '^not flat: m2 cetcd tmpfs_kb .*\(-[45][0-9]\.[0-9]%'
judged restart 1 '^restarted: m2 raftd: pids [0-9]+ [0-9]+ '
judged restart 0 '^flat=1$' -f isolate,kill
judged restart 0 '^flat=1$' -f slowdisk,crash
judged restart 0 '^flat=1$' -f storage
judged restart 1 '^restarted: m2 raftd: ' -f slowdisk,move-leader
judged hidden 1 '^not judged: m0 stored: no process of it has a level' -f all
# the level taken elsewhere: at 20 minutes the leak is still seen
judged leak 1 '^not flat: m1 stored rss_kb .*at 1200-2400 s of age' -l 1200
it_summary
