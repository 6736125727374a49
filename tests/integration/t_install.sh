#!/usr/bin/env bash
# make install lays out bin/, lib/sluice/, the man pages and the sample config, and
# the installed sluice finds the installed shim without SLUICE_LIB.
. "$(dirname "$0")/lib.sh"

make -s -C "$ROOT" BUILD="${BUILD:-build}" SAN="${SAN:-}" install PREFIX=/opt/sluice DESTDIR="$T/root" \
	>"$T/install.log" 2>&1 || fail "make install: $(tail -5 "$T/install.log")"
P="$T/root/opt/sluice"
for f in bin/sluice bin/sluiced lib/sluice/libsluice.so share/man/man1/sluice.1 \
	share/man/man1/sluiced.1 share/doc/sluice/sluice.ini share/doc/sluice/README.md; do
	[ -e "$P/$f" ] || fail "missing $f"
done
"$P/bin/sluice" check -c "$P/share/doc/sluice/sluice.ini" >/dev/null || fail "installed sample does not check"
printf '[x]\nmatch = 192.0.2.1\nrate = 1/s\n' >"$T/x.ini"
out=$(env -u SLUICE_LIB "$P/bin/sluice" run -c "$T/x.ini" -- sh -c 'echo "$LD_PRELOAD"') || fail "installed sluice run"
[ "$out" = "$P/lib/sluice/libsluice.so" ] || fail "LD_PRELOAD=$out"
