#!/usr/bin/env bash
# The Debian package as a user meets it: tools/package.sh builds it with
# Debian's flags (warnings as errors here) and lintian finds no error;
# then, under a real systemd booted in namespaces of this test's own
# (tests/lib/sd_boot.sh: nothing lands on the host), `apt-get install` of
# the .deb, removal and purge.
#
#  1. Install: the system user, the data dir, cetcd on the PATH and its
#     man page, /etc/default/cetcd as a conffile, cetcd.target enabled and
#     started by the package: a put and a get go through. The units pass
#     systemd-analyze verify, and systemd-analyze security rates each
#     service OK or better.
#  2. `apt-get remove`: every unit stopped, no process left, the programs
#     gone, the settings and the data kept; installed again, it serves the
#     data written before.
#  3. `apt-get purge`: the settings, the data dir and the units' links are
#     gone, and nothing the package installed is left.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../lib/sd_boot.sh"

sd_need
it_need_etcdctl
it_need_program dpkg-buildpackage "Debian package dpkg-dev"
it_need_program dh "Debian package debhelper"
it_need_program lintian "Debian package lintian"
it_need_program help2man "Debian package help2man"
it_init package

# ------------------------------------------------------------ the build
if CETCD_WERROR=ON PKG_DIR="$IT_TMP/build" PKG_OUT="$IT_TMP/pkg" \
	bash "$CETCD_SRC/tools/package.sh" >"$IT_TMP/package.log" 2>&1; then
	ok "tools/package.sh built the package, warning-free with Debian's flags, lintian: no error"
else
	fail "tools/package.sh built the package"
	tail -30 "$IT_TMP/package.log" | sed 's/^/    /'
	it_summary
	exit 1
fi
debs=("$IT_TMP"/pkg/cetcd_*.deb)
check "one .deb came out" test "${#debs[@]}" == 1 -a -f "${debs[0]}"
deb=${debs[0]##*/}
check "the build used Debian's hardening flags" \
	grep -q -- '-fstack-protector-strong' "$IT_TMP/build/build.log"

# ------------------------------------------------------------ the boot
# the .deb where the booted system sees it (its /tmp is a fresh tmpfs);
# a container image's policy-rc.d (which stops packages from starting
# their services) is taken out of the booted system's /usr, as a machine
# that boots systemd has none
cat >"$IT_TMP/install.sh" <<EOF
mkdir -p /var/cache/cetcd-test
cp "$IT_TMP/pkg/$deb" /var/cache/cetcd-test/
rm -f /usr/sbin/policy-rc.d
EOF
sd_boot

apt_get() {
	sd env DEBIAN_FRONTEND=noninteractive apt-get -y -q --no-install-recommends \
		-o Dpkg::Use-Pty=0 "$@" >>"$IT_TMP/out/apt.log" 2>&1
}
ctl() { sd etcdctl --endpoints=127.0.0.1:2379 --dial-timeout=2s --command-timeout=5s "$@"; }
active() { [[ $(sd systemctl is-active "$1") == active ]]; }
no_cetcd_process() {
	local st=0
	sd pgrep -u cetcd >/dev/null || st=$?
	((st == 1))
}
put_ok() { ctl put "$1" "$2" >/dev/null 2>&1; }

# ------------------------------------------------------------ 1. install
if apt_get install "/var/cache/cetcd-test/$deb"; then
	ok "apt-get install ./$deb"
else
	fail "apt-get install ./$deb"
	tail -20 "$IT_TMP/out/apt.log" | sed 's/^/    /'
fi
has_user() { sd id -u cetcd >/dev/null 2>&1; }
check "the package made the system user cetcd" has_user
check "the data dir's parent /var/lib/cetcd is 0700 and cetcd's" \
	test "$(sd stat -c '%a %U' /var/lib/cetcd 2>&1)" == "700 cetcd"
check "cetcd is on the PATH and runs" sd sh -c 'cetcd --version | grep -q "^cetcd Version: "'
check "its man page is installed" sd test -f /usr/share/man/man1/cetcd.1.gz
check "/etc/default/cetcd is a conffile" \
	sd sh -c "dpkg-query -W -f='\${Conffiles}' cetcd | grep -q '/etc/default/cetcd'"
check "cetcd.target is enabled" test "$(sd systemctl is-enabled cetcd.target)" == enabled
if it_until 30000 active cetcd.target; then
	ok "the package started cetcd.target"
else
	fail "the package started cetcd.target: $(sd systemctl is-active cetcd.target)"
	sd systemctl status --no-pager 'cetcd*' 2>&1 | tail -30 | sed 's/^/    /'
fi
check "a put goes through" it_until 30000 put_ok /pkg/a one
check "and reads back" test "$(ctl get /pkg/a --print-value-only)" == one
# every unit as installed: systemd-analyze verify has nothing to say, and
# systemd-analyze security rates each service OK or better
units=(cetcd-region cetcd-raftd cetcd-stored cetcd-gatewayd@0 cetcd-corrupt-check cetcd-auto-compact)
sd systemd-analyze verify cetcd.target "${units[@]/%/.service}" >"$IT_TMP/out/verify" 2>&1 || true
check "systemd-analyze verify of the units is clean: $(head -c 300 "$IT_TMP/out/verify")" \
	test ! -s "$IT_TMP/out/verify"
for u in "${units[@]}"; do
	rating=$(sd systemd-analyze security --no-pager "$u.service" 2>&1 | tail -1 |
		sed -n 's/.*: \([0-9.]*\) \([A-Z]*\).*/\1 \2/p')
	check "systemd-analyze security rates $u OK or better: ${rating:-none}" \
		eval '[[ ${rating#* } == OK || ${rating#* } == SAFE || ${rating#* } == PERFECT ]]'
done

# ------------------------------------------------------------ 2. remove
sd sh -c 'echo "# kept across remove" >>/etc/default/cetcd'
if apt_get remove cetcd; then ok "apt-get remove cetcd"; else fail "apt-get remove cetcd"; fi
check "no process of the user cetcd is left" it_until 15000 no_cetcd_process
check "the programs are gone" sd test ! -e /usr/lib/cetcd -a ! -e /usr/bin/cetcd
check "the settings are kept" sd grep -q '^# kept across remove$' /etc/default/cetcd
check "the data is kept" sd test -d /var/lib/cetcd/default/member
apt_get install "/var/cache/cetcd-test/$deb" || true
check "installed again, the member is started" it_until 30000 active cetcd.target
read_a() { [[ $(ctl get /pkg/a --print-value-only 2>/dev/null) == one ]]; }
check "and serves the data written before" it_until 30000 read_a
check "with the settings as they were" sd grep -q '^# kept across remove$' /etc/default/cetcd

# ------------------------------------------------------------ 3. purge
if apt_get purge cetcd; then ok "apt-get purge cetcd"; else fail "apt-get purge cetcd"; fi
check "no process of the user cetcd is left after the purge" it_until 15000 no_cetcd_process
check "dpkg no longer knows the package" \
	sd sh -c "! dpkg-query -W -f='\${Status}' cetcd 2>/dev/null | grep -q installed"
check "the settings are gone" sd test ! -e /etc/default/cetcd
check "the data dir is gone" sd test ! -e /var/lib/cetcd
left() {
	sd sh -c 'ls -d /lib/systemd/system/cetcd* /usr/lib/cetcd /usr/lib/sysusers.d/cetcd.conf \
		/usr/lib/tmpfiles.d/cetcd.conf /usr/share/doc/cetcd /usr/share/man/man1/cetcd.1.gz \
		/etc/systemd/system/*/cetcd* 2>/dev/null' || true
}
check "nothing the package installed is left: $(left | tr '\n' ' ')" test -z "$(left)"
it_summary
