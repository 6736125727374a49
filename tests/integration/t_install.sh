#!/usr/bin/env bash
# tier: check
# make install lays out bin/, lib/sluice/, the man pages and the sample config, and
# the installed sluice finds the installed shim without SLUICE_LIB.
. "$(dirname "$0")/lib.sh"

make -s -C "$ROOT" BUILD="${BUILD:-build}" SAN="${SAN:-}" install PREFIX=/opt/sluice DESTDIR="$T/root" \
	>"$T/install.log" 2>&1 || fail "make install: $(tail -5 "$T/install.log")"
P="$T/root/opt/sluice"
for f in bin/sluice bin/sluiced lib/sluice/libsluice.so share/man/man1/sluice.1 \
	share/man/man1/sluiced.1 share/man/man5/sluice.ini.5 share/doc/sluice/sluice.ini share/doc/sluice/README.md share/doc/sluice/LICENSE \
	share/doc/sluice/docs/guarantees.md share/doc/sluice/docs/config.md; do
	[ -e "$P/$f" ] || fail "missing $f"
done
# The man pages are sound roff, and sluice.ini(5) describes every key there is.
for m in man1/sluice.1 man1/sluiced.1 man5/sluice.ini.5; do
	out=$(groff -man -ww -z "$P/share/man/$m" 2>&1) || fail "groff $m: $out"
	[ -z "$out" ] || fail "groff warns about $m: $out"
done
MANPAGE_TEXT=$(MANWIDTH=200 man -l "$P/share/man/man5/sluice.ini.5" 2>/dev/null) || fail "man sluice.ini.5"
for key in $("$P/bin/sluice" check --keys | awk '{print $2}'); do
	grep -q "^ *$key (default" <<<"$MANPAGE_TEXT" || fail "sluice.ini(5) does not describe $key"
done
# sluice(1), made from docs/commands.md, names every option sluice --help lists.
OPTIONS_TEXT=$(MANWIDTH=200 man -l "$P/share/man/man1/sluice.1" 2>/dev/null | sed -n '/^Options/,/^Exit status/p')
[ -n "$OPTIONS_TEXT" ] || fail "sluice(1) has no Options"
for opt in $("$P/bin/sluice" --help 2>&1 | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
	grep -qE -- "$opt([^a-z-]|$)" <<<"$OPTIONS_TEXT" || fail "sluice(1)'s Options do not name $opt"
done
# sluiced(1), made from docs/sluiced.md, names every option sluiced --help lists.
MANPAGE_TEXT=$(MANWIDTH=200 man -l "$P/share/man/man1/sluiced.1" 2>/dev/null) || fail "man sluiced.1"
for opt in $("$P/bin/sluiced" --help | grep -o '^  -[A-Za-z]'); do
	grep -qE -- "^ *[^ ]+ $opt[ :,]" <<<"$MANPAGE_TEXT" || fail "sluiced(1) does not describe $opt: $MANPAGE_TEXT"
done
"$P/bin/sluice" check -c "$P/share/doc/sluice/sluice.ini" >/dev/null || fail "installed sample does not check"
printf '[x]\nmatch = 192.0.2.1\nrate = 1/s\n' >"$T/x.ini"
out=$(env -u SLUICE_LIB "$P/bin/sluice" run -c "$T/x.ini" -- sh -c 'echo "$LD_PRELOAD"') || fail "installed sluice run"
[ "$out" = "$P/lib/sluice/libsluice.so" ] || fail "LD_PRELOAD=$out"

# --- as a service: the unit, sysusers and tmpfiles entries, the machine's config ---
for f in lib/systemd/system/sluiced.service lib/sysusers.d/sluice.conf lib/tmpfiles.d/sluice.conf; do
	[ -e "$P/$f" ] || fail "missing $f"
done
# The README's next step, `systemd-sysusers; systemd-tmpfiles --create`, on the
# staging root (its entries named: they are under /opt here): the user and group
# sluice, and the control socket's directory, theirs.
systemd-sysusers --root="$T/root" "$P/lib/sysusers.d/sluice.conf" >"$T/sysusers.out" 2>&1 ||
	fail "systemd-sysusers: $(cat "$T/sysusers.out")"
grep -q '^sluice:' "$T/root/etc/passwd" || fail "systemd-sysusers made no user sluice"
grep -q '^sluice:' "$T/root/etc/group" || fail "systemd-sysusers made no group sluice"
systemd-tmpfiles --root="$T/root" --create "$P/lib/tmpfiles.d/sluice.conf" >"$T/tmpfiles.out" 2>&1 ||
	fail "systemd-tmpfiles: $(cat "$T/tmpfiles.out")"
[ -d "$T/root/run/sluice" ] || fail "systemd-tmpfiles made no /run/sluice"
E="$T/root/etc/sluice/sluice.ini"
[ -e "$E" ] || fail "missing /etc/sluice/sluice.ini"
"$P/bin/sluice" check -c "$E" >"$T/check.out" || fail "the installed /etc/sluice/sluice.ini does not check"
# Inert: [sluice] live, the examples commented out - nothing shaped until the
# operator adds a section.  The reference sample in the docs keeps them live.
grep -q "OK, 0 sections - nothing is shaped" "$T/check.out" || fail "the machine's config shapes: $(head -1 "$T/check.out")"
grep -q '^;\[hooks-spacing\]' "$E" || fail "the machine's config lost its commented examples"
"$P/bin/sluice" check -c "$P/share/doc/sluice/sluice.ini" | grep -q "OK, 1[0-9] sections" ||
	fail "the reference sample lost its sections"
grep -q '^control_socket = /run/sluice/sluice.sock' "$E" || fail "the machine's config keeps its socket elsewhere"
grep -q '^shm_group      = sluice' "$E" || fail "the machine's config does not name the group sluice"
grep -q "ExecStart=/opt/sluice/bin/sluiced -f -c /etc/sluice/sluice.ini -S /var/lib/sluice" "$P/lib/systemd/system/sluiced.service" ||
	fail "the unit does not start the installed sluiced"
# systemd reads the unit without complaint (its commands swapped for /bin/true:
# the install is not under /).
sed -e 's|^\(Exec[A-Za-z]*=\)[^ ]*|\1/bin/true|' -e '/^Documentation=/d' "$P/lib/systemd/system/sluiced.service" \
	>"$T/check.service"
out=$(systemd-analyze verify "$T/check.service" 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify: $out"

# --- readiness: READY=1 on NOTIFY_SOCKET once the control socket answers, the
# segment handed to the service manager's fd store before it (docs/operations.md "Running it
# on a machine") ---
write_config "$T/n.ini" <<EOF
[x]
match = 192.0.2.1
rate = 1/s
EOF
python3 - "$T/notify.sock" "$T/notified" <<'PY' &
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(20)
with open(sys.argv[2], "a") as f:
    for _ in range(16):
        msg, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(16 * 4))
        fds = sum(len(d) // 4 for lvl, typ, d in anc
                  if lvl == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS)
        f.write(msg.decode().replace("\n", " ") + (" fds=%d" % fds) + "\n")
        f.flush()
        if b"STOPPING=1" in msg:
            break
PY
BG_PIDS+=($!)
for _ in $(seq 50); do [ -S "$T/notify.sock" ] && break; sleep 0.1; done
NOTIFY_SOCKET="$T/notify.sock" "$P/bin/sluiced" -f -c "$T/n.ini" 2>"$T/n.log" &
npid=$!
BG_PIDS+=($npid)
for _ in $(seq 100); do grep -q READY=1 "$T/notified" 2>/dev/null && break; sleep 0.05; done
grep -q READY=1 "$T/notified" || fail "sluiced did not say READY=1"
grep -n "FDSTORE=1" "$T/notified" | grep "FDNAME=segment" | grep -q "fds=1" ||
	fail "the segment was not handed to the fd store: $(cat "$T/notified")"
[ "$(grep -n FDSTORE=1 "$T/notified" | head -1 | cut -d: -f1)" -lt "$(grep -n READY=1 "$T/notified" | cut -d: -f1)" ] ||
	fail "READY=1 came before the segment was in the fd store: $(cat "$T/notified")"
"$P/bin/sluice" stat -c "$T/n.ini" >/dev/null 2>"$T/n.err" && ! grep -q "no daemon answers" "$T/n.err" ||
	fail "READY=1 came before the control socket answered"
kill "$npid"
wait "$npid"
for _ in $(seq 50); do grep -q STOPPING=1 "$T/notified" && break; sleep 0.1; done
grep -q STOPPING=1 "$T/notified" || fail "sluiced did not say STOPPING=1"
note "installed: bin, lib, man, unit (verified), sysusers, tmpfiles, /etc/sluice/sluice.ini; segment stored, READY=1 and STOPPING=1 said"
# Every command says how it is used when asked, on stdout, and exits 0; the
# program that `sluice run` starts keeps its own --help.
for c in run check stat top reload acquire; do
	out=$("$P/bin/sluice" "$c" --help) || fail "sluice $c --help failed"
	grep -q "^usage: sluice $c " <<<"$out" || fail "sluice $c --help: $out"
done
"$P/bin/sluice" --help | grep -q "^       sluice CMD --help" || fail "sluice --help does not mention CMD --help"
"$P/bin/sluiced" --help | grep -q "^usage: sluiced" || fail "sluiced --help"
out=$("$P/bin/sluice" run -c /nonexistent/x.ini sh -c 'echo "$1"' sh --help 2>&1) || true
grep -q "usage: sluice run" <<<"$out" && fail "sluice run took its program's --help: $out"
# What `make` and `make run` install is what building and the demo need, and no
# test tool (docs/developing.md, "Dependencies"); the tests' own group has the rest.
build_pkgs=$("$ROOT/scripts/deps.sh" build --list | tr '\n' ' ')
for p in libcmocka-dev golang-go nodejs lintian gnuplot-nox php-cli ruby nghttp2-server busybox-static; do
	case " $build_pkgs " in *" $p "*) fail "make installs the test tool $p: $build_pkgs" ;; esac
	"$ROOT/scripts/deps.sh" test --list | grep -qx "$p" || fail "the tests' group lacks $p"
done
for p in libev-dev libinih-dev libhiredis-dev gcc; do
	case " $build_pkgs " in *" $p "*) ;; *) fail "the build group lacks $p: $build_pkgs" ;; esac
done
for target in all run; do
	calls=$(make -n -C "$ROOT" BUILD="$T/none" "$target" 2>/dev/null | grep -o '^scripts/deps.sh [a-z]*' | sort -u | tr '\n' ' ')
	[ "$calls" = "scripts/deps.sh build " ] || fail "make $target asks deps.sh for: $calls"
done
echo "ok"
