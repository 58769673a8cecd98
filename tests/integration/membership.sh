#!/usr/bin/env bash
# A member's membership as etcd 3.4 keeps it: on start it publishes its
# attributes through Raft and the leader sets the cluster version, with
# the log lines etcd's tooling waits for ("published local member to
# cluster through raft", "enabled capabilities for version"), again after
# a restart; `etcdctl member list` shows the published name and client
# URLs with etcd's ids; the db file holds etcd's members and cluster
# buckets (checked with the real bbolt code, tests/tools/boltcheck); and
# a stored killed and restarted keeps answering member list the same.
# Exits 77 when the programs, etcdctl, python3 or Go with Debian's bbolt
# are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_build_go_tool boltcheck go.etcd.io/bbolt
it_init membership

data=$IT_TMP/data
log=$IT_TMP/cetcd.log
it_cetcd_start m1 "$data" "$log"
if ! it_wait_healthy "$IT_CPORT" 30; then
	fail "the member answers"
	tail -20 "$log"
	exit 1
fi
ep=127.0.0.1:$IT_CPORT
ctl() { ETCDCTL_API=3 etcdctl --endpoints "$ep" --command-timeout 10s "$@"; }

check "published its attributes through raft" \
	it_wait_log "$log" '"msg":"published local member to cluster through raft".*"request-path":"/0/members/[0-9a-f]+/attributes"' 10
check "set the cluster version 3.4" \
	it_wait_log "$log" '"msg":"set initial cluster version".*"cluster-version":"3.4"' 10
check "enabled capabilities for version 3.4" \
	it_wait_log "$log" '"msg":"enabled capabilities for version","cluster-version":"3.4"' 10

list=$(ctl member list -w json)
# jq reads numbers as doubles: ids go through python
py() { python3 -c "import json, sys; d = json.load(sys.stdin); print($1)" <<<"$list"; }
id=$(py "d['header']['member_id']")
want_id=$(grep -o '"published local member[^}]*"local-member-id":"[0-9a-f]*"' "$log" | head -n1 | sed 's/.*"local-member-id":"//; s/"$//')
check "member list: one member, named m1" \
	test "$(jq -r '[.members[] | .name] | join(",")' <<<"$list")" = m1
check "member list: its client URL as published" \
	test "$(jq -r '.members[0].clientURLs | join(",")' <<<"$list")" = "http://127.0.0.1:$IT_CPORT"
check "member list: its peer URL" \
	test "$(jq -r '.members[0].peerURLs | join(",")' <<<"$list")" = "http://127.0.0.1:$IT_PPORT"
check "member list: the id the log names" \
	test "$(py "'%x' % d['members'][0]['ID']")" = "$want_id"
check "member list: the header's member id is the member's" \
	test "$(py "d['members'][0]['ID']")" = "$id"

# stored killed: it reloads the members from the db
if pid=$(it_cetcd_child stored); then
	kill -9 "$pid"
	check "the launcher restarts a SIGKILLed stored" it_wait_child stored "$pid" 30
else
	fail "the launcher runs a stored to kill"
fi
check "after stored restarted, member list is the same" \
	it_until 10000 bash -c "ETCDCTL_API=3 etcdctl --endpoints $ep member list -w json | jq -ce '.members' | grep -qF '\"name\":\"m1\"'"

# a restart publishes again and logs both lines again
check "stops on SIGTERM" it_cetcd_stop
: >"$IT_TMP/second.log"
it_cetcd_restart "$IT_TMP/second.log"
check "after a restart the member answers" it_wait_healthy "$IT_CPORT" 30
check "after a restart: enabled capabilities for version" \
	it_wait_log "$IT_TMP/second.log" '"msg":"enabled capabilities for version"' 10
check "after a restart: published again" \
	it_wait_log "$IT_TMP/second.log" '"msg":"published local member to cluster through raft"' 10
check "after a restart: the version is not set again" \
	test "$(it_count "$IT_TMP/second.log" '"msg":"updated cluster version"')" = 0
check "stops on SIGTERM" it_cetcd_stop

# etcd's buckets, read by bbolt
db=$data/member/snap/db
bolt() { "$IT_BUILD/tests/boltcheck" -text "$1" "$db"; }
members=$(bolt members) || fail "bbolt opens, checks and reads the members bucket"
cluster=$(bolt cluster) || fail "bbolt reads the cluster bucket"
echo "$members" "$cluster" | sed 's/^/    /'
check "bbolt: members holds the member as etcd's JSON under its hex id" \
	test "$members" = "$want_id {\"id\":$id,\"peerURLs\":[\"http://127.0.0.1:$IT_PPORT\"],\"name\":\"m1\",\"clientURLs\":[\"http://127.0.0.1:$IT_CPORT\"]}"
check "bbolt: cluster holds clusterVersion 3.4.0" test "$cluster" = "clusterVersion 3.4.0"
it_summary
