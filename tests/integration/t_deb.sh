#!/usr/bin/env bash
# tier: parallel
# make deb: a lintian-clean package (make deb fails on a lintian error) whose
# contents and maintainer scripts are what a machine needs, and which installs,
# shapes a user of the group, upgrades under load and is removed and purged
# cleanly in a throwaway root: an overlay of this machine in its own mount and
# IPC namespaces (nothing reaches the real /), with a stand-in systemctl
# (helpers/fake_systemctl.sh, its file descriptor store fake_service.py) since no
# systemd runs.  Across the upgrade - a restart of the service, which stops its
# keeper - the segment is kept in the store, and the destination sees the
# queue's spacing hold.
. "$(dirname "$0")/lib.sh"

make -s -C "$ROOT" BUILD="$BUILD_DIR" deb >"$T/deb.log" 2>&1 || fail "make deb: $(tail -20 "$T/deb.log")"
deb=$(sed -n 's/^built //p' "$T/deb.log")
[ -f "$deb" ] || fail "make deb said: $(cat "$T/deb.log")"
note "$(grep -c '^[WI]: ' "$T/deb.log") lintian warnings or notes"

# --- contents ---
dpkg-deb -c "$deb" | awk '{print $6}' >"$T/contents"
for f in ./usr/bin/sluice ./usr/bin/sluiced ./usr/lib/sluice/libsluice.so ./etc/sluice/sluice.ini \
	./lib/systemd/system/sluiced.service ./usr/lib/sysusers.d/sluice.conf ./usr/lib/tmpfiles.d/sluice.conf \
	./usr/share/man/man1/sluice.1.gz ./usr/share/man/man1/sluiced.1.gz ./usr/share/man/man5/sluice.ini.5.gz \
	./usr/share/doc/sluice/copyright ./usr/share/doc/sluice/changelog.gz; do
	grep -qx "$f" "$T/contents" || fail "the package lacks $f"
done
# The licence: LICENSE's BSD-2-Clause, and inih's notice, as the shim carries inih.
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/doc/sluice/copyright >"$T/copyright"
grep -q '^License: BSD-2-Clause' "$T/copyright" && grep -q '^License: BSD-3-Clause' "$T/copyright" &&
	grep -q "$(sed -n 's/^\(2\. Redistributions in binary form.*\)/\1/p' "$ROOT/LICENSE")" "$T/copyright" &&
	! grep -qi 'no right to' "$T/copyright" || fail "the copyright file: $(cat "$T/copyright")"
dpkg-deb -e "$deb" "$T/control"
[ "$(cat "$T/control/conffiles")" = /etc/sluice/sluice.ini ] || fail "conffiles: $(cat "$T/control/conffiles")"
for s in postinst prerm postrm; do
	sh -n "$T/control/$s" || fail "$s does not parse"
done
grep -q '^Depends:.*libev4.*libinih1' "$T/control/control" || fail "Depends: $(grep Depends "$T/control/control")"

# The upgrade: the same package one version on (a repack is enough for dpkg's
# view of an upgrade; the binaries are the ones just built).
mkdir -p "$T/pkg"
cp "$deb" "$T/pkg/sluice.deb"
dpkg-deb -R "$deb" "$T/next"
sed -i 's/^Version: \(.*\)/Version: \1+next/' "$T/next/DEBIAN/control"
dpkg-deb --root-owner-group -Zxz --build "$T/next" "$T/pkg/sluice-next.deb" >/dev/null || fail "repack"
cp "$HELPERS/fetch.py" "$T/pkg/"
chmod -R a+rX "$T/pkg"

# --- in a throwaway root ---
start_server
start_witness syn "$PORT" "$T/arrivals"
cat >"$T/enter.sh" <<EOF
set -eu
mount --make-rprivate /
mount -t tmpfs tmpfs "$T/ov"
mkdir -p "$T/ov/upper" "$T/ov/work" "$T/merged"
mount -t overlay overlay -o lowerdir=/,upperdir="$T/ov/upper",workdir="$T/ov/work" "$T/merged"
mount -t proc proc "$T/merged/proc"
mount --rbind /dev "$T/merged/dev"
mount -t tmpfs tmpfs "$T/merged/run"
mount -t tmpfs tmpfs "$T/merged/tmp"
mkdir -p "$T/merged/run/systemd/system" "$T/merged/pkg"
mount --bind "$T/pkg" "$T/merged/pkg"
install -m 0755 "$HELPERS/fake_systemctl.sh" "$T/merged/usr/bin/systemctl"
install -D -m 0755 "$HELPERS/fake_service.py" "$T/merged/usr/local/lib/fake_service.py"
# A container's "start no services" policy is this machine's, not the root's.
rm -f "$T/merged/usr/sbin/policy-rc.d"
install -m 0755 "$HELPERS/deb_inside.sh" "$T/merged/deb_inside.sh"
exec chroot "$T/merged" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root LANG=C.UTF-8 bash /deb_inside.sh /pkg "$PORT"
EOF
mkdir -p "$T/ov"
# A pid namespace too: whatever the package started dies with the test.
out=$(timeout 150 unshare --mount --ipc --pid --fork --kill-child bash "$T/enter.sh" 2>&1)
echo "$out" | grep -q "^inside: ok$" || fail "in the throwaway root: $out"
note "$(cat "$T/pkg/version"), upgraded to $(dpkg-deb -f "$T/pkg/sluice-next.deb" Version); maintainer scripts asked: $(grep -v '^is-\|^--version\|^list-units\|daemon-reload' "$T/pkg/systemctl.log" | sort | uniq -c | tr -s ' \n' ' ')"

# The destination's record: 40 connections, the group member shaped at 4/s,
# spaced throughout, the daemon's restart between them included.
witnessed "$T/arrivals" --interval-ms 250 --expect 40 --what "connects (across the upgrade)" ||
	fail "the spacing broke across the upgrade"
python3 -c '
import json, sys
s = [s for s in json.load(open(sys.argv[1]))["sections"] if s["name"] == "local-api"][0]
sys.exit(0 if s["admitted"] >= 40 else 1)' "$T/pkg/stat.json" ||
	fail "after the upgrade, the segment forgot the admissions before it: $(cat "$T/pkg/stat.json")"
