#!/usr/bin/env bash
# tier: parallel
# The daemon's state files are never followed, never waited on, and kept only in a
# directory no other user can write (docs/operations.md "Security"; docs/config.md,
# "Quotas that outlive the segment"):
#  - a symlink at NAME.quota.tmp pointing at another file: the file is untouched,
#    the quota saved;
#  - a FIFO at NAME.quota.tmp: the start does not hang; one at NAME.quota.lock:
#    refused with a message, at once;
#  - a state_dir writable by every user, by its group, or owned by another user:
#    refused, saying which and what to do;
#  - a start that fails at its first save (a full disk) leaves no segment for
#    programs to count on alone (their calls wait and are refused), and no mark
#    that makes the next good start take the quota for lost: it starts the month
#    afresh.
. "$(dirname "$0")/lib.sh"

start_server
cat >"$T/q.ini" <<EOF
[sluice]
shm_name = $SHM_NAME
control_socket = $CTL
state_dir = $T/state

[month]
match = 127.0.0.1:$PORT
rate = 5/mo
strategy = fixed-window
max_wait = 0
EOF
state="$T/state/${SHM_NAME#/}.quota"
# connects N: of N connects through the shim, how many went.
connects() {
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 30 python3 - "$PORT" "$1" <<'PY'
import socket, sys
ok = 0
for _ in range(int(sys.argv[2])):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10).close()
        ok += 1
    except ConnectionRefusedError:
        pass
print(ok)
PY
}
# refused_start WHAT: sluiced on q.ini exits within 5 s, non-zero, saying WHAT.
refused_start() {
	timeout 5 "$SLUICED" -f -c "$T/q.ini" 2>"$T/refused.log"
	local rc=$?
	[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "sluiced started (or hung: $rc) where it should refuse: $(cat "$T/refused.log")"
	grep -qF "$1" "$T/refused.log" || fail "sluiced did not say '$1': $(cat "$T/refused.log")"
}

# --- a symlink at the temporary name: not followed ---
mkdir -m 0700 "$T/state"
echo precious >"$T/victim"
ln -s "$T/victim" "$state.tmp"
start_daemon "$T/q.ini"
[ "$(connects 2)" -eq 2 ] || fail "the first two of the month did not go"
stop_daemon
[ "$(cat "$T/victim")" = precious ] || fail "the daemon wrote through the symlink at $state.tmp: $(head -c 80 "$T/victim")"
[ -f "$state" ] && [ ! -L "$state" ] || fail "no state file saved: $(ls -l "$T/state")"
[ ! -e "$state.tmp" ] || fail "the temporary name is still there: $(ls -l "$T/state")"
note "a symlink at the temporary name: removed, its target untouched, the quota saved"

# --- FIFOs: never waited on ---
mkfifo "$state.tmp"
start_daemon "$T/q.ini" # start_daemon fails the test after 10 s
[ "$(connects 5)" -eq 3 ] || fail "the month's quota after a FIFO at the temporary name is not 3 left"
stop_daemon
[ -p "$state.tmp" ] && fail "the FIFO at the temporary name is still there"
mv "$state.lock" "$T/lock.kept"
mkfifo "$state.lock"
refused_start "state file lock $state.lock: not a regular file"
rm -f "$state.lock"
mv "$T/lock.kept" "$state.lock"
note "a FIFO at the temporary name removed; one at the lock's name refused at once"

# --- a state_dir another user could write: refused ---
chmod 0777 "$T/state"
refused_start "state_dir $T/state is writable by every user (mode 0777): refused - chmod go-w it"
chmod 0770 "$T/state"
refused_start "state_dir $T/state is writable by its group (mode 0770)"
chmod 0700 "$T/state"
chown nobody "$T/state"
refused_start "state_dir $T/state belongs to uid $(id -u nobody), not to root or this daemon's user (uid 0)"
chown root "$T/state"
start_daemon "$T/q.ini"
stop_daemon
note "a state_dir writable by others, or another user's: refused with what to do"

# --- a full disk at the first save: the next start is not "lost" ---
# In a mount namespace of its own, the state_dir a tmpfs of 64 KiB: filled, the
# start fails at its first save; emptied, the next start gives the month afresh
# (no state file was ever saved), not "used up".
"$SLUICE" segments --remove "$SEG" >/dev/null || fail "the segment's keeper would not stop"
sed -i "s|^state_dir = .*|state_dir = $T/full/state|" "$T/q.ini"
mkdir -p "$T/full"
cat >"$T/full.sh" <<EOF
set -u
mount -t tmpfs -o size=64k,mode=0700 tmpfs "$T/full" || exit 90
mkdir -m 0700 "$T/full/state"
dd if=/dev/zero of="$T/full/fill" bs=4k 2>/dev/null
timeout 10 "$SLUICED" -f -c "$T/q.ini" 2>"$T/full1.log" && { echo "the start on a full disk succeeded"; exit 1; }
grep -q "No space left on device" "$T/full1.log" || { echo "no word of the full disk: \$(cat "$T/full1.log")"; exit 1; }
# Nothing half-made is left: no segment served, and a program's call waits for
# one and is refused - never counted alone against the quota.
[ -e "$SEG" ] && { echo "the failed start left a segment at $SEG"; exit 1; }
early=\$(LD_PRELOAD="$PRELOAD" SLUICE_CONFIG="$T/q.ini" timeout 30 python3 -c '
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10).close()
    print("went")
except OSError:
    print("refused")' "$PORT" 2>"$T/early.err")
[ "\$early" = refused ] || { echo "a call after the failed start: \$early"; exit 1; }
grep -q "cannot use the shared queues at $SEG" "$T/early.err" || { echo "not told: \$(cat "$T/early.err")"; exit 1; }
rm -f "$T/full/fill"
"$SLUICED" -f -c "$T/q.ini" 2>"$T/full2.log" &
d=\$!
for _ in \$(seq 100); do [ -S "$SEG" ] && "$SLUICE" stat -c "$T/q.ini" >/dev/null 2>&1 && break; sleep 0.1; done
ok=\$(LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 30 python3 -c '
import socket, sys
ok = 0
for _ in range(6):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10).close()
        ok += 1
    except ConnectionRefusedError:
        pass
print(ok)' "$PORT")
kill \$d
wait \$d
"$SLUICE" segments --remove "$SEG" >/dev/null 2>&1
echo "went \$ok"
EOF
out=$(unshare --mount --propagation private bash "$T/full.sh" 2>&1)
[ "$out" = "went 5" ] || fail "after a start that failed on a full disk: $out ($(cat "$T/full2.log" 2>/dev/null))"
grep -q "used up" "$T/full2.log" && fail "the next start took the quota for lost: $(cat "$T/full2.log")"
note "a start failed on a full disk: nothing served, a call refused; the next gave the month afresh: 5 of 6 went"
echo "ok"
