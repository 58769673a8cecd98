# A real systemd booted as PID 1 of the test's own PID, mount, network,
# UTS, IPC and cgroup namespaces, with fresh tmpfs on /tmp, /run and
# /var/tmp, and overlays on /etc, /usr and /var whose upper layers are the
# test's dirs, so nothing lands on the host; units that would change the
# host's kernel settings are masked. Sourced by tests that boot one
# (systemd.sh, package.sh) after lib.sh:
#
#   sd_need                 skips the test where systemd cannot boot here
#   (write $IT_TMP/install.sh: bash run in the namespaces before the boot,
#    with the overlays mounted and the host's /tmp still visible; $T is
#    IT_TMP, $BUILD the build dir)
#   sd_boot                 boots; fails the test if it does not come up
#   sd CMD...               runs CMD inside, as root
#
# sd_kill (at exit) stops it and the cgroups are removed.

sd_need() {
	[[ $(id -u) == 0 ]] || it_skip "booting systemd in namespaces needs root"
	[[ -x /lib/systemd/systemd ]] || it_skip "systemd is not installed"
	it_need_program unshare "Debian package util-linux"
	it_need_program nsenter "Debian package util-linux"
	grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
		it_skip "the kernel has no overlay file system"
	[[ -d /sys/fs/cgroup/unified || $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]] ||
		it_skip "no cgroup2 hierarchy to give systemd"
}

SD_PID=
sd_kill() {
	[[ -n $SD_PID ]] || return 0
	kill -9 "$SD_PID" 2>/dev/null || true
	it_wait_gone "$SD_PID" 5000 || true
}
# Runs a command inside: systemd's namespaces (and root).
sd() { nsenter -t "$SD_PID" -a "$@"; }

# The test's cgroups (IT_CG, set by sd_boot) gone, innermost first.
cg_gone() {
	local cg
	for cg in "${IT_CG[@]}"; do
		[[ -d $cg ]] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
		[[ ! -d $cg ]] || return 1
	done
}
cg_cleanup() { it_until 10000 cg_gone || echo "left behind: ${IT_CG[*]}"; }
sd_found() {
	SD_PID=$(pgrep -P "$UNSHARE_PID" -x systemd) && [[ -n $SD_PID ]]
}
sd_booted() {
	local st
	st=$(sd systemctl is-system-running 2>/dev/null) || true
	[[ $st == running || $st == degraded ]]
}

# Writes the script that runs in the new namespaces before systemd.
sd_write_boot_script() {
	mkdir -p "$IT_TMP"/{etc,usr,var}/{up,work} "$IT_TMP/out"
	cat >"$IT_TMP/boot.sh" <<'EOF'
# In the new namespaces: the overlays, the install, the fresh tmpfs, the
# masks, then systemd as PID 1.
set -euo pipefail
T=$1 BUILD=$2
mount --make-rprivate /
for d in etc usr var; do
	mount -t overlay overlay -o "lowerdir=/$d,upperdir=$T/$d/up,workdir=$T/$d/work" "/$d"
done
# what the test installs before the boot ($T/install.sh, if any)
if [[ -f $T/install.sh ]]; then
	source "$T/install.sh"
fi
if [[ -d /sys/fs/cgroup/unified ]]; then
	# hybrid: systemd tracks its units in the named and the unified
	# hierarchies, both mounted again to show this cgroup namespace's root
	mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup
	mkdir /sys/fs/cgroup/unified /sys/fs/cgroup/systemd
	mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
	mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd
else
	mount -t cgroup2 cgroup2 /sys/fs/cgroup
fi
for d in /tmp /run /var/tmp; do
	mount -t tmpfs -o mode=1777 tmpfs "$d"
done
chmod 755 /run
mkdir -p /run/systemd/system
for u in systemd-sysctl.service systemd-modules-load.service kmod-static-nodes.service \
	systemd-tmpfiles-setup-dev.service systemd-binfmt.service \
	proc-sys-fs-binfmt_misc.automount systemd-udev-trigger.service \
	systemd-udevd.service systemd-hwdb-update.service systemd-random-seed.service \
	systemd-machine-id-commit.service systemd-firstboot.service \
	sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount \
	sys-fs-fuse-connections.mount dev-hugepages.mount dev-mqueue.mount; do
	ln -s /dev/null "/run/systemd/system/$u"
done
cat >/run/systemd/system/cetcd-test-boot.target <<'UNIT'
[Unit]
Description=the test's boot target: basic.target only
Requires=basic.target
After=basic.target
AllowIsolate=yes
UNIT
ip link set lo up
export container=cetcd-test
exec /lib/systemd/systemd --system --unit=cetcd-test-boot.target
EOF
}

sd_boot() {
	# The test's cgroup: systemd's root, through a cgroup namespace, in each
	# hierarchy it uses. Removed at exit, innermost first.
	IT_CG=()
	if [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; then
		IT_CG+=("/sys/fs/cgroup/cetcd-systemd-$$")
	else
		IT_CG+=("/sys/fs/cgroup/unified/cetcd-systemd-$$")
		[[ -d /sys/fs/cgroup/systemd ]] && IT_CG+=("/sys/fs/cgroup/systemd/cetcd-systemd-$$")
	fi
	it_on_exit+=("sd_kill" "cg_cleanup")
	sd_write_boot_script
	(
		for cg in "${IT_CG[@]}"; do
			mkdir -p "$cg"
			echo "$BASHPID" >"$cg/cgroup.procs"
		done
		exec unshare --pid --mount --net --uts --ipc --cgroup --fork --mount-proc --kill-child \
			bash "$IT_TMP/boot.sh" "$IT_TMP" "$IT_BUILD"
	) >"$IT_TMP/out/boot.log" 2>&1 &
	UNSHARE_PID=$!
	it_track "$UNSHARE_PID"
	if ! it_until 120000 sd_found || ! it_until 60000 sd_booted; then
		fail "systemd booted in the test's namespaces"
		sed 's/^/    /' "$IT_TMP/out/boot.log" | tail -30
		it_summary
		exit 1
	fi
	ok "systemd booted in the test's namespaces ($(sd systemctl is-system-running))"
	if [[ $(sd systemctl is-system-running) == degraded ]]; then
		sd systemctl --failed --no-pager | sed 's/^/    /'
	fi
}
