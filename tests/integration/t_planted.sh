#!/usr/bin/env bash
# tier: parallel
# Nobody gets in (docs/operations.md "Running it on a machine", "Trust"): another user who
# serves a segment and a control socket first, where root's config puts them (a
# directory anyone may write), with a rate of their own.  The test makes the user
# (removed at the end) and works in a mount namespace of its own:
#  - root's programs are told on stderr that the segment there is another user's,
#    never use it, and wait for the real one (none of their connects reaches the
#    destination at the planted rate - none at all before root's daemon runs);
#  - root's sluiced puts both sockets aside, loudly, and serves its own: from
#    then on the programs are shaped at root's rate, spaced at the destination;
#  - `sluice stat` asks only the daemon it may trust;
#  - `sluice run` refuses a run directory the other user made for it first.
# Judged by the kernel's SYN stamps at the destination.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || fail "needs root: it makes a user"
planter="slp$$"
useradd -M -N -s /bin/sh "$planter" || fail "useradd"
trap 'pkill -KILL -u "$planter" 2>/dev/null; sleep 0.2; userdel "$planter" 2>/dev/null; cleanup' EXIT
chmod 755 "$T"
mkdir -m 1777 "$T/pub"

start_server
# Root's config and the planter's: the same sockets, in a directory anyone may
# write; the planter's rate a thousand times root's, its segment open to all.
cat >"$T/root.ini" <<EOF
[sluice]
shm_name = /sluice
control_socket = $T/pub/sluice.sock

[api]
match = 127.0.0.1:$PORT
rate = 5/s
max_wait = 1s
EOF
sed -e 's|^rate = 5/s|rate = 5000/s|' -e 's|^\[api\]|[api]|' "$T/root.ini" >"$T/planted.ini"
sed -i 's|^control_socket = .*|&\nshm_mode = 0666|' "$T/planted.ini"
chmod 644 "$T/root.ini" "$T/planted.ini"
runuser -u "$planter" -- "$SLUICED" -f -c "$T/planted.ini" 2>"$T/planted.log" &
BG_PIDS+=($!)
for _ in $(seq 100); do [ -S "$T/pub/sluice.segment" ] && [ -S "$T/pub/sluice.sock" ] && break; sleep 0.1; done
[ "$(stat -c %U "$T/pub/sluice.segment")" = "$planter" ] || fail "the planter's daemon did not start: $(cat "$T/planted.log")"

# connects N: N connects through the shim (root's config); how many went.
connects() {
	LD_PRELOAD="$PRELOAD" SLUICE_CONFIG="$T/root.ini" timeout 60 python3 - "$PORT" "$1" <<'PY'
import socket, sys
ok = 0
for _ in range(int(sys.argv[2])):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10).close()
        ok += 1
    except OSError:
        pass
print(ok)
PY
}

# --- root's programs, with only the planted segment there ---
start_syn_witness "$PORT" "$T/syns.planted"
went=$(connects 3 2>"$T/prog.err")
sleep 0.3
grep -q "cannot use the shared queues at $T/pub/sluice.segment: it is served by uid $(id -u "$planter"), neither root, this user, nor the owner of $T/pub alone" \
	"$T/prog.err" || fail "the program was not told the segment is another user's: $(cat "$T/prog.err")"
[ "$went" -eq 0 ] && [ ! -s "$T/syns.planted" ] ||
	fail "with only another user's segment, $went connects went ($(wc -l <"$T/syns.planted") at the destination)"
"$SLUICE" stat -c "$T/root.ini" >"$T/stat1.out" 2>&1 && fail "sluice stat believed the planted daemon: $(head -3 "$T/stat1.out")"
grep -q "5000/s" "$T/stat1.out" && fail "sluice stat showed the planted limits: $(cat "$T/stat1.out")"
kill "$WITNESS_PID"
note "root's programs, with another user's segment where theirs belongs: told, 0 of 3 went"

# --- root's daemon: both sockets put aside, its own served ---
start_daemon "$T/root.ini"
grep -q "$T/pub/sluice.sock is answered by another user's process, not root's or this daemon's user's: removed" \
	"$T/sluiced.log" || fail "the planted control socket was not put aside loudly: $(cat "$T/sluiced.log")"
grep -q "segment socket $T/pub/sluice.segment: it is served by uid $(id -u "$planter"), neither root nor this daemon's user: not taken over; a segment of this daemon's is made in its place" \
	"$T/sluiced.log" || fail "the planted segment was not put aside loudly: $(cat "$T/sluiced.log")"
[ "$(stat -c %U "$T/pub/sluice.segment")" = root ] || fail "the segment socket is not root's: $(ls -l "$T/pub")"
"$SLUICE" stat -c "$T/root.ini" >"$T/stat2.out" || fail "sluice stat on root's daemon: $(cat "$T/stat2.out")"
grep -q "5/s" "$T/stat2.out" || fail "sluice stat does not show root's limit: $(cat "$T/stat2.out")"
start_syn_witness "$PORT" "$T/syns.root"
LD_PRELOAD="$PRELOAD" SLUICE_CONFIG="$T/root.ini" SLUICE_FALLBACK=closed timeout 60 python3 - "$PORT" <<'PY' ||
import socket, sys
for _ in range(6):
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10).close()
PY
	fail "root's program failed under root's daemon"
sleep 0.3
kill "$WITNESS_PID"
witnessed "$T/syns.root" --interval-ms 200 --expect 6 --what "connects, root's daemon after the planted one" ||
	fail "root's limit did not hold"
stop_daemon

# --- `sluice run`'s own segment: its run directory made by the other user first
# (XDG_RUNTIME_DIR/sluice, with a socket for the pid to come): refused, loudly;
# the command is not started unshaped ---
mkdir -m 1777 "$T/xdg"
runuser -u "$planter" -- sh -c "mkdir -m 0777 '$T/xdg/sluice' && touch '$T/xdg/sluice/run-99999.segment'"
sed "s|^control_socket = .*|control_socket = $T/nodaemon/sluice.sock|" "$T/root.ini" >"$T/run.ini"
XDG_RUNTIME_DIR="$T/xdg" "$SLUICE" run -c "$T/run.ini" -- sh -c 'echo started' >"$T/run.out" 2>"$T/run.err" &&
	fail "sluice run used another user's run directory: $(cat "$T/run.out" "$T/run.err")"
grep -q "started" "$T/run.out" && fail "the command was started"
grep -q "cannot use $T/xdg/sluice for the run's segment socket: another user's, or others may write it" "$T/run.err" ||
	fail "sluice run did not say why: $(cat "$T/run.err")"
note "sluice run, its run directory another user's: refused, the command not started"
echo "ok"
