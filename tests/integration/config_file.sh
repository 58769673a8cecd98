#!/usr/bin/env bash
# --config-file (config/file.c) and --log-outputs to files, on a running
# member, beside Debian's etcd 3.4 given the same file:
#   - a YAML file in etcd's form (the transport-security block, a list
#     for log-outputs, a quoted retention) starts a member that serves on
#     the file's URLs, under the file's name; the flags and ETCD_
#     variables given with it are ignored (etcd's line, a warning each);
#   - log-outputs: every process's lines go to both files of the list;
#   - etcd 3.4 takes the same file and serves under the same name;
#   - a file with an unknown key stops the start, exit 1, naming the key
#     and its line (etcd would ignore the key).
# Exits 77 when the programs, etcdctl or python3 are missing.
source "$(dirname "$0")/lib.sh"
it_need_cetcd
it_need_etcdctl
it_init config-file

ctl() { etcdctl --dial-timeout 2s --command-timeout 10s "$@"; }
# the name of the (one) member serving on the client port
member_name() {
	ctl --endpoints "127.0.0.1:$cport" member list -w json |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["members"][0]["name"])'
}
read -r cport pport < <(it_free_ports 2)
mkdir -p "$IT_RT/m" && chmod 700 "$IT_RT/m"
conf=$IT_TMP/etcd.conf.yml
# write_conf DATA_DIR [EXTRA LINE]: the member's file
write_conf() {
	cat >"$conf" <<EOF
# a member in etcd 3.4's file form
name: 'from-file'
data-dir: $1
snapshot-count: 5000
listen-client-urls: http://127.0.0.1:$cport
advertise-client-urls: http://127.0.0.1:$cport
listen-peer-urls: http://127.0.0.1:$pport
initial-advertise-peer-urls: http://127.0.0.1:$pport
initial-cluster: from-file=http://127.0.0.1:$pport
initial-cluster-token: 'file-token'
client-transport-security:
  client-cert-auth: false
  auto-tls: false
logger: zap
log-outputs: [$IT_TMP/a.log, $IT_TMP/b.log]
auto-compaction-mode: periodic
auto-compaction-retention: "1"
runtime-dir: $IT_RT/m
${2:-}
EOF
}

write_conf "$IT_TMP/data"
ETCD_NAME=from-env "$IT_BIN/cetcd" --config-file "$conf" --name from-flag \
	--snapshot-count 7 2>"$IT_TMP/stderr.log" &
pid=$!
it_track "$pid"
check "the member serves on the file's client URL" it_wait_healthy "$cport" 60
name=$(member_name)
check "under the file's name ($name), not the flag's or the variable's" test "$name" = from-file
check "etcd's line says the file is loaded" \
	it_log_has "$IT_TMP/a.log" '"msg":"loaded server configuration, other configuration command line flags and environment variables will be ignored if provided"' 1
check "the ignored flags are named" it_log_has "$IT_TMP/a.log" '"msg":"flag ignored: a configuration file is given","flag":"snapshot-count"' 1
for p in cetcd raftd stored gatewayd-0 auto-compact; do
	for f in a b; do
		check "$p writes to $f.log" it_until 10000 it_log_has "$IT_TMP/$f.log" "\"logger\":\"$p\"" 1
	done
done
check "nothing goes to stderr, not in the list" test ! -s "$IT_TMP/stderr.log"
kill -TERM "$pid"
check "the member stops" it_wait_gone "$pid" 20000

# Debian's etcd 3.4 takes the same file (its own data dir)
if command -v etcd >/dev/null; then
	write_conf "$IT_TMP/etcd-data"
	grep -v '^runtime-dir:' "$conf" >"$conf.etcd"
	etcd --config-file "$conf.etcd" 2>"$IT_TMP/etcd.log" &
	epid=$!
	it_track "$epid"
	check "etcd 3.4 serves with the same file" it_wait_healthy "$cport" 60
	name=$(member_name)
	check "under the same name ($name)" test "$name" = from-file
	kill -TERM "$epid"
	it_wait_gone "$epid" 20000 || kill -9 "$epid"
else
	echo "  (etcd is not installed: the side-by-side part is skipped)"
fi

# a misspelt key stops the start
write_conf "$IT_TMP/data" "snapshot-cuont: 10"
set +e
"$IT_BIN/cetcd" --config-file "$conf" 2>"$IT_TMP/bad.log"
st=$?
set -e
check "a file with an unknown key exits 1" test "$st" -eq 1
check "naming the key and its line" grep -q "etcd.conf.yml: line 19: unknown key snapshot-cuont" "$IT_TMP/bad.log"
it_summary
