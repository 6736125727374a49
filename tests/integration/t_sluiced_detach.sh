#!/usr/bin/env bash
# tier: check
# sluiced without -f detaches (docs/commands.md "sluiced"), and says what went wrong while it
# started: the command returns once the daemon serves (exit 0, its output let go,
# so $(sluiced ...) does not hang), or with the daemon's reason and exit 1.  A
# relative config path names the same file after the daemon has moved to /, at
# the start and at every reload.  In namespaces of the test's own (IPC, a /run for
# the default control socket, PID: the daemon ends with the test).
if [ -z "${SL_DETACH_NS:-}" ]; then
	[ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root (namespaces)"; exit 1; }
	exec env SL_DETACH_NS=1 unshare --mount --ipc --pid --fork --mount-proc bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"

mount --make-rprivate / || fail "mount --make-rprivate"
mount -t tmpfs tmpfs /run || fail "no /run of its own"
cd "$T" || fail "cd"
printf '[api]\nmatch = 127.0.0.1:9\nrate = 5/s\n' >rel.ini

# Started from the config's directory with a relative path; it returns at once.
out=$(timeout 20 "$SLUICED" -c rel.ini 2>&1)
rc=$?
[ $rc -eq 0 ] || fail "sluiced -c rel.ini exited $rc: $out"
pid=$(pgrep -x sluiced) || fail "no sluiced runs after it returned 0"
BG_PIDS+=($pid)
[ "$(readlink /proc/"$pid"/cwd)" = / ] || fail "the daemon did not move to /"
"$SLUICE" stat --json -c rel.ini >s1.json || fail "stat: $(cat s1.json)"
[ "$(json_field s1.json api rate)" = 5/s ] || fail "the daemon serves another config: $(cat s1.json)"

# A reload re-reads the same file, though the daemon runs in /.
sed -i 's|^rate = 5/s|rate = 7/s|' rel.ini
"$SLUICE" reload -c rel.ini >reload.out 2>&1 || fail "reload: $(cat reload.out)"
"$SLUICE" stat --json -c rel.ini >s2.json || fail "stat after the reload"
[ "$(json_field s2.json api rate)" = 7/s ] || fail "the reload did not read rel.ini: $(cat s2.json)"

# A second one cannot serve: it says why and exits 1, and the first serves on.
out=$(timeout 20 "$SLUICED" -c rel.ini 2>&1)
rc=$?
[ $rc -eq 1 ] || fail "a second sluiced exited $rc: $out"
grep -q "another sluiced answers" <<<"$out" || fail "the second sluiced did not say why: $out"
kill -0 "$pid" 2>/dev/null || fail "the first daemon is gone"
echo "ok"
