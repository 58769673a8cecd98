#!/usr/bin/env bash
# Builds cetcd's Debian package as Debian builds one (dpkg-buildpackage,
# debhelper, dpkg-buildflags) and checks it with lintian:
#
#   bash tools/package.sh            # -> pkg/cetcd_<version>_<arch>.deb
#   apt-get install ./pkg/cetcd_*.deb
#
# The packaging is tools/debian/; the source is copied beside it into
# PKG_DIR (default build-pkg/) so that the tree itself stays as it is.
# The .deb and lintian's report land in PKG_OUT (default pkg/). Needs the
# build packages of tools/packages.txt (tools/deps.sh installs them).
# CETCD_WERROR=ON makes warnings errors (the project's own checks); a
# plain run, as a distribution's, only warns. Exits 1 if the build fails
# or lintian reports an error.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${PKG_DIR:-$root/build-pkg}
out=${PKG_OUT:-$root/pkg}
version=$(sed -n 's/^project(cetcd VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
[[ -n $version ]] || { echo "package: no version in CMakeLists.txt" >&2; exit 1; }
# the changelog names the version the tree builds
head -1 "$root/tools/debian/changelog" | grep -q "^cetcd ($version)" || {
	echo "package: tools/debian/changelog's first entry is not $version (CMakeLists.txt)" >&2
	exit 1
}

rm -rf "$work"
src=$work/cetcd-$version
mkdir -p "$src" "$out"
# the tree's files, without build directories: what git tracks, or
# (outside a clone) everything but build*/ and pkg/
if git -C "$root" rev-parse --show-toplevel >/dev/null 2>&1 &&
	[[ $(git -C "$root" rev-parse --show-toplevel) == "$root" ]]; then
	git -C "$root" ls-files -z --cached --others --exclude-standard |
		grep -z -v -E '^(build[^/]*|pkg)/' | tar -C "$root" --null -T - -cf - | tar -C "$src" -xf -
else
	tar -C "$root" --exclude='./build*' --exclude=./pkg -cf - . | tar -C "$src" -xf -
fi
cp -r "$root/tools/debian" "$src/debian"
# one home for the user and the data dir entries: systemd/
cp "$root/systemd/cetcd.sysusers" "$src/debian/cetcd.sysusers"
cp "$root/systemd/cetcd.tmpfiles" "$src/debian/cetcd.tmpfiles"

arch=$(dpkg --print-architecture)
deb=cetcd_${version}_$arch.deb
(
	cd "$src"
	export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-} parallel=$(nproc) nocheck"
	dpkg-buildpackage -b -us -uc >"$work/build.log" 2>&1
) || {
	echo "package: dpkg-buildpackage failed; the end of $work/build.log:" >&2
	tail -40 "$work/build.log" >&2
	exit 1
}
cp "$work/$deb" "$out/$deb"
echo "package: built $out/$deb"
if command -v lintian >/dev/null; then
	rc=0
	lintian --fail-on error --info "$out/$deb" >"$out/lintian.txt" 2>&1 || rc=$?
	sed 's/^/lintian: /' "$out/lintian.txt"
	if ((rc)); then
		echo "package: lintian reports errors" >&2
		exit 1
	fi
	echo "package: lintian: no errors ($(grep -c '^W:' "$out/lintian.txt" || true) warnings)"
else
	echo "package: lintian is not installed; not checked" >&2
	exit 1
fi
