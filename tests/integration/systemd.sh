#!/usr/bin/env bash
# The units of systemd/ under a real systemd, as an operator deploys them:
# `cmake --install` of this build (prefix /usr), systemd-sysusers, then
# `systemctl start cetcd.target`. systemd boots in namespaces of this
# test's own, and nothing lands on the host (sd_boot.sh).
#
#  1. The generator makes cetcd.target want one gateway per CPU (one on
#     1 or 2 CPUs). `systemctl start cetcd.target` returns only once raftd,
#     stored and the gateways told systemd they serve (Type=notify): a
#     connection right after it is taken, and so is a put, 5 starts in a
#     row. The daemons run as the user cetcd, with the data dir as etcd
#     makes it. ETCD_GATEWAYS=2 and a daemon-reload give two gateways.
#  2. SIGKILL of gatewayd@0, then of stored: systemd restarts each, and no
#     acknowledged write is lost. The watchdog: raftd, stored and the
#     gateways have WatchdogSec=; with it shortened to 2 s, an idle member
#     lives on (each loop feeds it), and each daemon stopped with SIGSTOP
#     is killed by systemd's watchdog and restarted.
#  3. `systemctl stop cetcd.target` stops every unit and none is failed;
#     the region's runtime dir is gone. A new start serves the old data.
#     `systemctl stop cetcd-region.service` returns only once every
#     daemon of the member is stopped.
#  4. The launcher alone in a Type=notify unit shaped like Debian's
#     etcd.service: systemctl start returns once the member published
#     itself, and only the launcher notifies.
#  5. A second member on the host, from /etc/cetcd/b.env: the generator
#     makes its units (cetcd@b.target, two gateways), it runs beside the
#     default member with a data dir and a runtime dir of its own, each
#     serves its own data, and stopping one leaves the other serving.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../lib/sd_boot.sh"

sd_need
it_need_cetcd
it_need_etcdctl
it_init systemd

# ------------------------------------------------------------ the boot
cat >"$IT_TMP/install.sh" <<'EOF'
cmake --install "$BUILD" --prefix /usr >"$T/out/install.log"
systemd-sysusers >"$T/out/sysusers.log" 2>&1
EOF
sd_boot

check "cmake --install put the programs in /usr/lib/cetcd" \
	sd test -x /usr/lib/cetcd/raftd -a -x /usr/lib/cetcd/gatewayd -a -x /usr/lib/cetcd/cetcd
has_user() { sd id -u "$1" >/dev/null 2>&1; }
check "systemd-sysusers made the user cetcd" has_user cetcd
check "/etc/default/cetcd was installed" sd grep -q '^ETCD_DATA_DIR=/var/lib/cetcd/default$' /etc/default/cetcd

# ------------------------------------------------------------ 1. start
ctl() { sd etcdctl --endpoints=127.0.0.1:2379 --dial-timeout=2s --command-timeout=5s "$@"; }
# The gateways the generator should make wanted: ETCD_GATEWAYS, else one
# per CPU but one on a machine of 1 or 2 CPUs (at most 64).
cpus=$(nproc)
default_gateways=$((cpus <= 2 ? 1 : cpus > 64 ? 64 : cpus))
gw_units() {
	local i
	for ((i = 0; i < $1; i++)); do echo -n " cetcd-gatewayd@$i"; done
}
UNITS="cetcd-region cetcd-raftd cetcd-stored$(gw_units "$default_gateways")"
gateways_wanted() {
	sd systemctl show -P Wants cetcd.target | tr ' ' '\n' | grep -c '^cetcd-gatewayd@' || true
}
check "the generator made cetcd.target want $default_gateways gateway(s) on $cpus CPUs" \
	test "$(gateways_wanted)" == "$default_gateways"
units_active() {
	local u
	for u in $UNITS; do
		[[ $(sd systemctl is-active "$u.service") == active ]] || return 1
	done
}
# The state of each unit, and the journal of those that are not active.
units_show() {
	local u st
	for u in $UNITS cetcd-corrupt-check cetcd-auto-compact; do
		st=$(sd systemctl is-active "$u.service") || true
		echo "    $u: $st"
		[[ $st == active ]] || sd journalctl -u "$u.service" --no-pager -n 15 -o cat |
			cut -c1-400 | sed 's/^/      /'
	done
}
first_put_ok=0 first_conn_ok=0
for i in 1 2 3 4 5; do
	if ! sd systemctl start cetcd.target >"$IT_TMP/out/start.$i" 2>&1; then
		fail "systemctl start cetcd.target ($i): $(cat "$IT_TMP/out/start.$i")"
		break
	fi
	# right away, with no retry: curl gives up on a refused connection
	if sd curl -sf -o /dev/null --max-time 5 http://127.0.0.1:2379/version; then
		first_conn_ok=$((first_conn_ok + 1))
	fi
	if ctl put "/start/$i" "v$i" >"$IT_TMP/out/put.$i" 2>&1; then
		first_put_ok=$((first_put_ok + 1))
	else
		sed 's/^/    /' "$IT_TMP/out/put.$i"
	fi
	if ! units_active; then
		fail "start $i: every unit of the member is active"
		units_show
	fi
	((i == 5)) || sd systemctl stop cetcd.target
done
check "the client port took a connection right after systemctl start returned ($first_conn_ok of 5 starts)" \
	test "$first_conn_ok" == 5
check "a put right after that was taken ($first_put_ok of 5 starts)" \
	test "$first_put_ok" == 5
check "the puts of all 5 starts are there" \
	test "$(ctl get --prefix /start/ --print-value-only | tr '\n' ' ')" == "v1 v2 v3 v4 v5 "

main_pid() { sd systemctl show -P MainPID "$1"; }
owner_is_cetcd() {
	local u p
	for u in ${UNITS#cetcd-region }; do
		p=$(main_pid "$u.service")
		[[ $p != 0 && $(sd ps -o user= -p "$p") == cetcd ]] || return 1
	done
}
check "raftd, stored and the gateways run as the user cetcd" owner_is_cetcd
check "the data dir's member/ is mode 0700 and owned by cetcd" \
	test "$(sd stat -c '%a %U' /var/lib/cetcd/default/member)" == "700 cetcd"
check "the region file lives in the runtime dir" sd test -f /run/cetcd/region

# Two gateways: ETCD_GATEWAYS, daemon-reload (the generator runs again),
# restart. Each takes connections of its own (SO_REUSEPORT).
sd systemctl stop cetcd.target
sd sh -c 'echo ETCD_GATEWAYS=2 >>/etc/default/cetcd'
sd systemctl daemon-reload
check "after ETCD_GATEWAYS=2 and daemon-reload, cetcd.target wants 2 gateways" \
	test "$(gateways_wanted)" == 2
UNITS="cetcd-region cetcd-raftd cetcd-stored$(gw_units 2)"
sd systemctl start cetcd.target
check "the member's 5 units are active" units_active
attached_both() {
	local u n=0
	for u in cetcd-gatewayd@0 cetcd-gatewayd@1; do
		sd journalctl -u "$u.service" --no-pager -o cat | grep -q '"ready to serve client requests"' &&
			n=$((n + 1))
	done
	((n == 2))
}
# (the journal may take the line a moment after systemd took READY=1)
check "both gateways logged that they are ready to serve" it_until 10000 attached_both

# ------------------------------------------------------------ 2. restarts
# A writer runs through each kill; every acknowledged put must be there.
writer() {
	local n=0
	while [[ ! -e $IT_TMP/out/stop-writer ]]; do
		if ctl put "/w/$(printf %05d $n)" "$n" >/dev/null 2>&1; then
			echo "$n" >>"$IT_TMP/out/acked"
		fi
		n=$((n + 1))
	done
}
: >"$IT_TMP/out/acked"
writer &
WRITER=$!
it_track "$WRITER"
acked() { wc -l <"$IT_TMP/out/acked"; }
acked_more_than() { (($(acked) > $1)); }
restarted() {
	local p
	p=$(main_pid "$1")
	[[ $p != 0 && $p != "$2" && $(sd systemctl is-active "$1") == active ]]
}
for u in cetcd-gatewayd@0.service cetcd-stored.service; do
	it_until 20000 acked_more_than "$(($(acked) + 20))" || true
	old=$(main_pid "$u")
	if [[ $old == 0 ]]; then
		fail "$u runs before its kill: $(sd systemctl is-active "$u")"
		continue
	fi
	sd kill -9 "$old"
	if it_until 30000 restarted "$u" "$old"; then
		ok "systemd restarted $u after SIGKILL (pid $old, now $(main_pid "$u"))"
	else
		fail "systemd restarted $u after SIGKILL: $(sd systemctl is-active "$u")"
		sd journalctl -u "$u" --no-pager -n 20 | sed 's/^/    /'
	fi
	before=$(acked)
	check "writes are acknowledged again after the restart of $u" \
		it_until 30000 acked_more_than "$((before + 20))"
done
touch "$IT_TMP/out/stop-writer"
wait "$WRITER" || true
lost=0
sd etcdctl --endpoints=127.0.0.1:2379 get --prefix /w/ --print-value-only >"$IT_TMP/out/have"
while read -r n; do
	grep -qx "$n" "$IT_TMP/out/have" || lost=$((lost + 1))
done <"$IT_TMP/out/acked"
check "none of $(acked) acknowledged puts was lost ($lost missing)" test "$lost" == 0

# The watchdog, shortened to 2 s by a drop-in for the three daemons.
wd_units="cetcd-raftd.service cetcd-stored.service cetcd-gatewayd@0.service"
for u in $wd_units; do
	check "$u has WatchdogSec=30s" test "$(sd systemctl show -P WatchdogUSec "$u")" == 30s
done
sd sh -c 'for u in cetcd-raftd cetcd-stored cetcd-gatewayd@; do
	mkdir -p /run/systemd/system/$u.service.d
	printf "[Service]\nWatchdogSec=2s\n" >/run/systemd/system/$u.service.d/wd.conf
done'
sd systemctl daemon-reload
sd systemctl restart cetcd.target
all_active() {
	local u
	for u in $wd_units; do [[ $(sd systemctl is-active "$u") == active ]] || return 1; done
}
it_until 30000 all_active || true
pids_before=$(for u in $wd_units; do main_pid "$u"; done | tr '\n' ' ')
sleep 7
pids_after=$(for u in $wd_units; do main_pid "$u"; done | tr '\n' ' ')
check "with WatchdogSec=2s, an idle member's daemons live on for 7 s ($pids_before-> $pids_after)" \
	test "$pids_before" == "$pids_after" -a "$(sd systemctl show -P NRestarts cetcd-stored.service)" == 0
for u in $wd_units; do
	old=$(main_pid "$u")
	sd kill -STOP "$old"
	if it_until 20000 restarted "$u" "$old"; then
		ok "$u stopped with SIGSTOP was restarted by the watchdog (pid $old, now $(main_pid "$u"))"
	else
		fail "$u stopped with SIGSTOP was restarted by the watchdog: $(sd systemctl is-active "$u")"
	fi
	check "systemd logged the watchdog's timeout for $u" \
		sd sh -c "journalctl -u '$u' -o cat | grep -q 'Watchdog timeout'"
done
it_until 30000 all_active || true
wd_put() { ctl put /wd/after yes >/dev/null 2>&1; }
check "writes go through after the watchdog's restarts" it_until 30000 wd_put
sd sh -c 'rm -rf /run/systemd/system/cetcd-raftd.service.d /run/systemd/system/cetcd-stored.service.d \
	/run/systemd/system/cetcd-gatewayd@.service.d'
sd systemctl daemon-reload

# ------------------------------------------------------------ 3. stop
# systemctl stop cetcd.target returns once the target is stopped, which
# systemd orders before its units' stops (the reverse of their start);
# stopping cetcd-region.service returns only after every daemon, since
# each is ordered after it.
none_running() {
	local u st
	for u in $UNITS cetcd-corrupt-check cetcd-auto-compact; do
		st=$(sd systemctl is-active "$u.service") || true
		[[ $st == inactive ]] || return 1
	done
}
units_states() {
	local u
	for u in $UNITS cetcd-corrupt-check cetcd-auto-compact; do
		echo -n " $u=$(sd systemctl is-active "$u.service")"
	done
}
sd systemctl stop cetcd.target
if it_until 30000 none_running; then
	ok "systemctl stop cetcd.target stopped every unit, none failed"
else
	fail "systemctl stop cetcd.target stopped every unit, none failed:$(units_states)"
fi
check "the runtime dir and its region are gone" sd test ! -e /run/cetcd
# no_cetcd_process: pgrep in the namespace finds no process of the user
# cetcd (its status 1; 2 or more, or nsenter's own failure, say nothing)
no_cetcd_process() {
	local st=0
	sd pgrep -u cetcd >/dev/null || st=$?
	((st == 1))
}
check "no process of the user cetcd is left" no_cetcd_process
sd systemctl start cetcd.target
check "a new start serves the data written before" \
	test "$(ctl get /start/3 --print-value-only)" == v3
sd systemctl stop cetcd-region.service
if none_running; then
	ok "systemctl stop cetcd-region.service returned with every unit stopped, none failed"
else
	fail "systemctl stop cetcd-region.service returned with every unit stopped:$(units_states)"
fi
check "and no process of the user cetcd is left" no_cetcd_process

# ------------------------------------------------------------ 4. one unit
# The launcher in a unit shaped like Debian's etcd.service (Type=notify,
# the launcher as ExecStart), as an operator who swaps etcd's program for
# cetcd's has it: systemctl start returns once the member published itself
# (READY=1 from the launcher), and the daemons it starts do not notify.
sd sh -c 'cat >/run/systemd/system/cetcd-single.service' <<'UNIT'
[Service]
Type=notify
User=cetcd
Environment=ETCD_NAME=default
Environment=ETCD_DATA_DIR=/var/lib/cetcd/default
Environment=ETCD_RUNTIME_DIR=/dev/shm
Environment=ETCD_LISTEN_CLIENT_URLS=http://127.0.0.1:2379
Environment=ETCD_ADVERTISE_CLIENT_URLS=http://127.0.0.1:2379
Environment=ETCD_LISTEN_PEER_URLS=http://127.0.0.1:2380
Environment=ETCD_INITIAL_ADVERTISE_PEER_URLS=http://127.0.0.1:2380
Environment=ETCD_INITIAL_CLUSTER=default=http://127.0.0.1:2380
ExecStart=/usr/lib/cetcd/cetcd
TimeoutStartSec=30s
UNIT
sd systemctl daemon-reload
if sd systemctl start cetcd-single.service 2>"$IT_TMP/out/single"; then
	ok "systemctl start of the launcher's Type=notify unit returned"
else
	fail "systemctl start of the launcher's Type=notify unit: $(cat "$IT_TMP/out/single")"
	sd journalctl -u cetcd-single.service --no-pager -n 15 -o cat | cut -c1-300 | sed 's/^/    /'
fi
check "the unit is active" test "$(sd systemctl is-active cetcd-single.service)" == active
check "the launcher told systemd once the member had published itself" \
	sd sh -c 'journalctl -u cetcd-single.service -o cat | grep -q "told the service manager that the member is ready"'
check "it serves the member's data" test "$(ctl get /start/4 --print-value-only)" == v4
check "no daemon it started sent systemd a notification" \
	sd sh -c '! journalctl -u cetcd-single.service -o cat | grep -q "reception only permitted for main PID"'
sd systemctl stop cetcd-single.service
check "the unit stopped cleanly" test "$(sd systemctl is-active cetcd-single.service)" == inactive

# ------------------------------------------------------------ 5. two members
sd mkdir -p /etc/cetcd
sd sh -c 'cat >/etc/cetcd/b.env' <<'ENV'
ETCD_NAME=b
ETCD_GATEWAYS=2
ETCD_LISTEN_CLIENT_URLS=http://127.0.0.1:22379
ETCD_ADVERTISE_CLIENT_URLS=http://127.0.0.1:22379
ETCD_LISTEN_PEER_URLS=http://127.0.0.1:22380
ETCD_INITIAL_ADVERTISE_PEER_URLS=http://127.0.0.1:22380
ETCD_INITIAL_CLUSTER=b=http://127.0.0.1:22380
ENV
sd systemctl daemon-reload
b_gateways() { sd systemctl show -P Wants cetcd@b.target | tr ' ' '\n' | grep -c '^cetcd-gatewayd@b-' || true; }
check "the generator made cetcd@b.target, wanting 2 gateways" test "$(b_gateways)" == 2
check "and cetcd@b.target starts at boot" \
	sd sh -c 'systemctl show -P WantedBy cetcd@b.target | grep -qw multi-user.target'
UNITS_B="cetcd-region@b cetcd-raftd@b cetcd-stored@b cetcd-gatewayd@b-0 cetcd-gatewayd@b-1"
b_active() {
	local u
	for u in $UNITS_B; do [[ $(sd systemctl is-active "$u.service") == active ]] || return 1; done
}
if sd systemctl start cetcd.target cetcd@b.target 2>"$IT_TMP/out/start-b"; then
	ok "systemctl start cetcd.target cetcd@b.target returned"
else
	fail "systemctl start cetcd.target cetcd@b.target: $(cat "$IT_TMP/out/start-b")"
fi
UNITS="cetcd-region cetcd-raftd cetcd-stored$(gw_units 2)"
check "both members' units are active" eval 'units_active && b_active'
ctl_b() { sd etcdctl --endpoints=127.0.0.1:22379 --dial-timeout=2s --command-timeout=5s "$@"; }
ctl put /who default >/dev/null
ctl_b put /who b >/dev/null
check "each member serves its own data" \
	test "$(ctl get /who --print-value-only)/$(ctl_b get /who --print-value-only)" == default/b
check "b's data dir is its own" test "$(sd stat -c '%a %U' /var/lib/cetcd/b/member)" == "700 cetcd"
check "b's region is in a runtime dir of its own" sd test -f /run/cetcd-b/region -a -f /run/cetcd/region
check "b's member name is b" sd sh -c "etcdctl --endpoints=127.0.0.1:22379 member list | grep -q ', b, '"
sd systemctl stop cetcd@b.target
b_none() {
	local u
	for u in $UNITS_B; do [[ $(sd systemctl is-active "$u.service") == inactive ]] || return 1; done
}
check "stopping cetcd@b.target stopped b's units" it_until 30000 b_none
check "b's runtime dir is gone" sd test ! -e /run/cetcd-b
check "the default member still serves" test "$(ctl get /who --print-value-only)" == default
sd systemctl start cetcd@b.target
check "b started again serves its data" test "$(ctl_b get /who --print-value-only)" == b
sd systemctl stop cetcd.target cetcd@b.target
it_summary
