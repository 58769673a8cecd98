#!/usr/bin/env bash
# A runtime dir whose file system has no room for the member's region
# (docs/design.md, "Where the region lives"): the launcher, which checks
# the room with statvfs when it sizes the region (shm/region.c), refuses
# to start. The runtime dir lies on an 8 MiB tmpfs of the test's own,
# mounted in a private mount namespace (the test runs itself again under
# unshare -m).
#  1. cetcd exits with status 1 at once (within 20 s), its log naming the
#     runtime dir, the region's size, the room there is (8 MiB, as df
#     says) and what to do; no process of the member is left, and the
#     tmpfs holds nothing and uses nothing.
#  2. So does cetcd --prepare-only, which makes the region a named file
#     for the systemd units: no region file, nor a temporary one, is left.
#  3. The tmpfs made as large as the region asks, the member starts on the
#     same data and runtime dirs, answers, and stops with status 0.
# Exits 77 when not root (the mount needs it), without unshare, or when
# the programs, etcdctl or curl are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_mount_ns "mounting a small tmpfs for the runtime dir" "$@"
it_init runtime-room

fs=$IT_TMP/fs
it_tmpfs "$fs" 8m
rt=$fs/rt
data=$IT_TMP/data
read -r cport pport < <(it_free_ports 2)
args=(--name r1 --data-dir "$data" --runtime-dir "$rt"
	--listen-client-urls "http://127.0.0.1:$cport"
	--advertise-client-urls "http://127.0.0.1:$cport"
	--listen-peer-urls "http://127.0.0.1:$pport"
	--initial-advertise-peer-urls "http://127.0.0.1:$pport"
	--initial-cluster "r1=http://127.0.0.1:$pport")

# left: what the tmpfs holds, and the KiB it uses ("" and 0 when empty).
left() {
	local files
	files=$(find "$fs" -mindepth 1 ! -path "$rt" | tr '\n' ' ')
	echo "${files}used $(df -k --output=used "$fs" | tail -1 | tr -d ' ') KiB"
}
# no_procs: no process runs with the test's dirs in its command line.
no_procs() {
	local p
	for p in /proc/[0-9]*; do it_ours "${p#/proc/}" && return 1; done
	return 0
}

# 1. the launcher
log=$IT_TMP/start.log
st=0
timeout 20 "$IT_BIN/cetcd" "${args[@]}" 2>"$log" || st=$?
check "1: cetcd exits with status 1 (status $st)" test "$st" = 1
msg='"msg":"cannot create the member region"'
check "1: it says it cannot create the member region in the runtime dir" \
	grep -q "$msg.*\"runtime-dir\":\"$fs\"" "$log"
need=$({ grep -o 'no room for the [0-9]* MiB region' "$log" || true; } | head -1 | tr -dc 0-9)
check "1: it says the region's size (${need:-?} MiB) and the 8 MiB free, and what to do" \
	grep -q "no room for the $need MiB region .*: the runtime dir has 8 MiB free; make it larger or lower --max-request-bytes" "$log"
check "1: no process of the member is left" it_until 5000 no_procs
check "1: the tmpfs holds nothing and uses nothing ($(left))" test "$(left)" = "used 0 KiB"

# 2. --prepare-only
log=$IT_TMP/prepare.log
st=0
timeout 20 "$IT_BIN/cetcd" "${args[@]}" --prepare-only 2>"$log" || st=$?
check "2: cetcd --prepare-only exits with status 1 (status $st)" test "$st" = 1
check "2: it says the region has no room in the runtime dir" \
	grep -q "no room for the $need MiB region $rt/.*: the runtime dir has [0-9]* MiB free" "$log"
check "2: no region file is left, nor a temporary one ($(left))" \
	test -z "$(find "$rt" -mindepth 1 2>/dev/null)"

# 3. room enough
[[ -z $need ]] || mount -o remount,size=$((need + 8))m "$fs"
"$IT_BIN/cetcd" "${args[@]}" 2>>"$IT_TMP/ok.log" &
pid=$!
it_track "$pid"
check "3: with the tmpfs at $((need + 8)) MiB the member answers" it_wait_healthy "$cport" 30
check "3: a put is taken" \
	etcdctl --endpoints "127.0.0.1:$cport" --dial-timeout 2s --command-timeout 5s put k v
st=0
kill -TERM "$pid"
wait "$pid" || st=$?
check "3: it stops with status 0 (status $st)" test "$st" = 0
it_summary
