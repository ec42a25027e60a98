#!/usr/bin/env bash
# The Debian package (issue 28): cpack -G DEB from this build, installed with dpkg on this machine, used, and
# removed again:
#   - both daemons in /usr/bin answer --version with the project's version;
#   - the units are installed and pass `systemd-analyze verify`;
#   - /etc/steadfast holds the configuration (conffiles) and belongs to the group `steadfast` (0750), which
#     the package created for the units' SupplementaryGroups=;
#   - dpkg -r removes the binaries and units, dpkg -P the configuration.
# Needs root (dpkg -i). Refuses to touch a machine where a steadfast package is installed already.
#   BUILD=build/release CPACK=cpack bash test/package/deb.sh
set -euo pipefail
BUILD="$(cd "${BUILD:?set BUILD to a build with the apps}" && pwd)"
CPACK="${CPACK:-cpack}"
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "the package test installs with dpkg -i: run it as root"
if dpkg-query -W -f='${Status}' steadfast 2>/dev/null | grep -q installed; then
  fail "a steadfast package is installed on this machine already; remove it first (dpkg -r steadfast)"
fi
WORK="$(mktemp -d /tmp/steadfast-deb.XXXXXX)"
installed=0
cleanup() {
  [ "$installed" = 0 ] || dpkg -P steadfast >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

(cd "$WORK" && "$CPACK" -G DEB --config "$BUILD/CPackConfig.cmake" >"$WORK/cpack.log" 2>&1) || fail "cpack: $(tail -20 "$WORK/cpack.log")"
deb=$(ls "$WORK"/steadfast_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "cpack made no steadfast_*.deb: $(ls "$WORK") $(tail -5 "$WORK/cpack.log")"
version=$(sed -n 's/^#define STEADFAST_VERSION_STRING "\(.*\)"$/\1/p' "$(dirname "$0")/../../engine/include/steadfast/version.hpp")
[ "$(dpkg-deb -f "$deb" Package)" = steadfast ] || fail "package name: $(dpkg-deb -f "$deb" Package)"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "package version $(dpkg-deb -f "$deb" Version), not $version"
dpkg-deb -f "$deb" Depends | grep -q libsqlite3 || fail "Depends lacks the shared libraries: $(dpkg-deb -f "$deb" Depends)"
dpkg-deb -c "$deb" >"$WORK/contents"
for f in ./usr/bin/steadfast-primary ./usr/bin/steadfast-secondary ./lib/systemd/system/steadfast-primary.service \
         ./lib/systemd/system/steadfast-secondary.service ./etc/steadfast/primary.conf ./etc/steadfast/secondary.conf \
         ./usr/share/doc/steadfast/steadfast.rules.yml ./usr/share/doc/steadfast/README.secrets; do
  grep -q " $f\$" "$WORK/contents" || fail "the package lacks $f"
done
grep -q "include/steadfast" "$WORK/contents" && fail "the daemons' package carries the development headers"
dpkg -e "$deb" "$WORK/control"
grep -qx /etc/steadfast/primary.conf "$WORK/control/conffiles" || fail "primary.conf is not a conffile"

dpkg -i "$deb" >"$WORK/dpkg.log" 2>&1 || fail "dpkg -i: $(cat "$WORK/dpkg.log")"
installed=1
[ "$(/usr/bin/steadfast-primary --version)" = "steadfast-primary $version" ] || fail "/usr/bin/steadfast-primary --version: $(/usr/bin/steadfast-primary --version)"
[ "$(/usr/bin/steadfast-secondary --version)" = "steadfast-secondary $version" ] || fail "/usr/bin/steadfast-secondary --version"
getent group steadfast >/dev/null || fail "the package did not create the group steadfast"
[ "$(stat -c '%U:%G %a' /etc/steadfast)" = "root:steadfast 750" ] || fail "/etc/steadfast is $(stat -c '%U:%G %a' /etc/steadfast)"
systemd-analyze verify /lib/systemd/system/steadfast-primary.service /lib/systemd/system/steadfast-secondary.service \
  >"$WORK/verify.log" 2>&1 || fail "systemd-analyze verify: $(cat "$WORK/verify.log")"
# verify exits 0 on some warnings: none may name our units.
grep -i "steadfast" "$WORK/verify.log" && fail "systemd-analyze verify warns about the units: $(cat "$WORK/verify.log")"
# The installed configuration is what the daemons read: they get as far as its missing certificates.
rc=0; /usr/bin/steadfast-secondary --config /etc/steadfast/secondary.conf --data "$WORK/sdata" 2>"$WORK/err" || rc=$?
[ "$rc" = 2 ] && grep -q '/etc/steadfast/' "$WORK/err" || fail "the installed secondary.conf: exit $rc, $(cat "$WORK/err")"

dpkg -r steadfast >"$WORK/dpkg.log" 2>&1 || fail "dpkg -r: $(cat "$WORK/dpkg.log")"
[ ! -e /usr/bin/steadfast-primary ] || fail "dpkg -r left /usr/bin/steadfast-primary"
[ ! -e /lib/systemd/system/steadfast-primary.service ] || fail "dpkg -r left the unit"
[ -e /etc/steadfast/primary.conf ] || fail "dpkg -r removed a conffile (only purge should)"
dpkg -P steadfast >"$WORK/dpkg.log" 2>&1 || fail "dpkg -P: $(cat "$WORK/dpkg.log")"
installed=0
[ ! -e /etc/steadfast/primary.conf ] || fail "dpkg -P left /etc/steadfast/primary.conf"
echo "deb: $(basename "$deb") built, installed, verified and removed"
