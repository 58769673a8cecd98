#!/usr/bin/env bash
# The member region holds tmpfs pages only for what it carries: a member
# with the default flags lays out a region of more than 100 MiB (rings
# sized for the largest request, the broadcast ring, the latest-entry
# cache, the token table), yet right after it starts, idle, the region's
# file holds at most REGION_IDLE_MIB (16) MiB of tmpfs. A put load of
# large values grows it past that; once the load stops, the rings and the
# event ring give their pages back (shm/ring.h, shm/bcast.h: after a quiet
# second) and it is under the limit again, and the member still serves
# what it stored.
# The figure is the region file's allocated blocks (stat of the
# launcher's descriptor of it: the file has no name).
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init region-footprint

LIMIT_MIB=${REGION_IDLE_MIB:-16}

# region_kib FIELD: the region file the launcher holds open: its size
# (size) or the tmpfs it holds (used), in KiB.
region_kib() {
	local fd link
	for fd in /proc/"$IT_CETCD_PID"/fd/*; do
		link=$(readlink "$fd" 2>/dev/null) || continue
		[[ $link == "$IT_RT/m/"* ]] || continue
		if [[ $1 == size ]]; then
			echo $(($(stat -L -c %s "$fd") / 1024))
		else
			echo $(($(stat -L -c '%b * %B' "$fd") / 1024))
		fi
		return 0
	done
	return 1
}
under_limit() { (($(region_kib used) <= LIMIT_MIB * 1024)); }

it_cetcd_start m "$IT_TMP/data" "$IT_TMP/m.log"
it_member_answers "$IT_CPORT" "$IT_TMP/m.log" "the member"
ep="127.0.0.1:$IT_CPORT"

size=$(region_kib size)
echo "  region laid out: $((size / 1024)) MiB, held idle: $(region_kib used) KiB"
check "the region is laid out larger than the limit (else this proves nothing)" \
	test "$size" -gt $((LIMIT_MIB * 1024))
check "idle after start, the region holds at most $LIMIT_MIB MiB of tmpfs" under_limit

# 48 puts of 512 KiB each: 24 MiB through the rings to raftd and stored
# and the broadcast ring, more than each of them holds.
head -c $((384 * 1024)) /dev/urandom | base64 -w0 >"$IT_TMP/val"
put_all() {
	local i
	for i in $(seq 48); do
		etcdctl --endpoints "$ep" put "big$((i % 4))" <"$IT_TMP/val" >/dev/null || return 1
	done
}
check "48 puts of 512 KiB are acknowledged" put_all
loaded=$(region_kib used)
echo "  held after the puts: $loaded KiB"
check "the puts grew the region's pages" test "$loaded" -gt $((LIMIT_MIB * 1024))
check "quiet again, the region shrinks back to at most $LIMIT_MIB MiB within 10 s" \
	it_until 10000 under_limit
echo "  held once quiet: $(region_kib used) KiB"
same_value() {
	local got
	got=$(etcdctl --endpoints "$ep" get big1 --print-value-only) || return 1
	[[ $got == "$(cat "$IT_TMP/val")" ]]
}
check "a value put before the shrink reads back whole" same_value
check "a put after the shrink is acknowledged" put_all
check "and reads back whole" same_value
it_summary
