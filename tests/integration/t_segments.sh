#!/usr/bin/env bash
# tier: check
# Segments an operator can see and manage (docs/commands.md "Segments"), by their sockets:
#  - a segment kept for root with mode 0600 is refused to another user: `sluice
#    stat` names the socket, its owner and mode, and the fix (never "join group
#    root");
#  - `sluice segments` lists each socket's keeper, owner, mode, processes
#    attached, daemon, name and config, and marks the one a program here would use;
#  - `--remove-unused` stops the keepers nobody is attached to and no daemon uses,
#    and removes sockets nobody answers on; never one in use;
#  - a `sluice run` killed by SIGKILL leaves its private socket (its segment went
#    with it); the next run removes it;
#  - `sluice stat` with another config's file says which config made the segment.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || fail "needs root (another user)"
chmod 755 "$T"
mkdir -p "$T/nobody" "$T/xdg"
chown nobody "$T/nobody"
chmod 700 "$T/xdg"
export XDG_RUNTIME_DIR="$T/xdg" # this test's own run directory for `sluice run`

# --- a root segment left behind, mode 0600 ---
write_config "$T/left.ini" <<EOF
shm_mode = 0600

[a]
match = 127.0.0.1:9
rate = 1/s
EOF
start_daemon "$T/left.ini"
stop_daemon
[ -S "$SEG" ] || fail "the stopped daemon's segment is not kept at $SEG"
keeper=$(python3 -c 'import os, sys; sys.path.insert(0, os.environ["HELPERS"]); import segment
print(segment.value(segment.ask(sys.argv[1], "info")[0], "pid"))' "$SEG")
[ -n "$keeper" ] && alive "$keeper" || fail "no keeper answers at $SEG"

# Another user: refused (the socket's mode keeps it out), told why and what to do.
runuser -u nobody -- "$SLUICE" stat --segment "$SEG" >/dev/null 2>"$T/stat.err" && fail "nobody read a 0600 segment"
grep -qF "cannot read segment at $SEG (owner root:root, mode 0600): Permission denied" "$T/stat.err" ||
	fail "stat's error does not name the segment: $(cat "$T/stat.err")"
grep -qF "only its owner and root may use it (mode 0600): give a group of users access with shm_mode = 0660" \
	"$T/stat.err" || fail "stat's error gives no fix: $(cat "$T/stat.err")"
grep -q "usermod -aG root\|group root" "$T/stat.err" && fail "stat advises group root: $(cat "$T/stat.err")"

# --- in use: a running daemon ---
write_config "$T/live.ini" <<EOF
[b]
match = 127.0.0.1:9
rate = 1/s
EOF
sed -i -e "s|^shm_name = .*|shm_name = $SHM_NAME-live|" "$T/live.ini"
start_daemon "$T/live.ini"
live="$T/${SHM_NAME#/}-live.segment"

# --- a keeper killed: its socket stays, nobody answers on it ---
write_config "$T/dead.ini" <<EOF
[d]
match = 127.0.0.1:9
rate = 1/s
EOF
sed -i -e "s|^shm_name = .*|shm_name = $SHM_NAME-dead|" -e "s|^control_socket = .*|control_socket = $T/dead.sock|" \
	"$T/dead.ini"
"$SLUICED" -f -c "$T/dead.ini" 2>>"$T/sluiced.log" &
dpid=$!
dead="$T/${SHM_NAME#/}-dead.segment"
# The daemon binds the socket, then forks and execs its keeper: wait for the
# keeper itself (a loaded machine runs the exec a while after the bind).
for _ in $(seq 100); do [ -S "$dead" ] && pgrep -f -- "--keep .* $dead" >/dev/null && break; sleep 0.1; done
kill "$dpid"; wait "$dpid" 2>/dev/null
pkill -9 -f -- "--keep .* $dead" || fail "no keeper of $dead to kill"
sleep 0.2

# --- a sluice run killed by SIGKILL: its private socket stays ---
write_config "$T/run.ini" <<EOF
[c]
match = 127.0.0.1:9
rate = 1/s
EOF
sed -i -e '/^shm_name/d' -e '/^control_socket/d' "$T/run.ini"
"$SLUICE" run -c "$T/run.ini" -- sleep 30 &
run_pid=$!
for _ in $(seq 50); do [ -S "$T/xdg/sluice/run-$run_pid.segment" ] && break; sleep 0.1; done
[ -S "$T/xdg/sluice/run-$run_pid.segment" ] || fail "sluice run serves no segment in its run directory"
prog=$(pgrep -P "$run_pid")
kill -9 "$run_pid" $prog
wait "$run_pid" 2>/dev/null

"$SLUICE" segments -c "$T/left.ini" >"$T/list" || fail "sluice segments"
note "$(cat "$T/list")"
line() { grep -F " $1 " "$T/list"; }
line "$SEG" | grep -qE "^\* $SEG +$keeper +root:root +0600 +0 +[0-9]+s +none +$SHM_NAME +$T/left.ini$" ||
	fail "the segment left behind, as listed: $(line "$SEG")"
line "$live" | grep -qE " root:root +0660 +1 +[0-9]+s +$DAEMON_PID +$SHM_NAME-live +$T/live.ini$" ||
	fail "the live segment, as listed: $(line "$live")"
line "$dead" | grep -qE " gone .*nobody answers" || fail "the dead keeper's socket, as listed: $(line "$dead")"
line "$T/xdg/sluice/run-$run_pid.segment" | grep -q " gone " ||
	fail "the killed run's socket, as listed: $(cat "$T/list")"
grep -qF "(* the one a program started here would use: $SEG)" "$T/list" || fail "no word of which one is used here"

# The next sluice run removes the killed one's socket.
"$SLUICE" run -c "$T/run.ini" -- true || fail "a sluice run after the killed one"
[ -e "$T/xdg/sluice/run-$run_pid.segment" ] && fail "the next sluice run left the killed one's socket"

# --- the other config's file ---
sed -e "s|^control_socket = .*|control_socket = $T/none.sock|" "$T/live.ini" >"$T/other.ini"
"$SLUICE" stat -c "$T/other.ini" >/dev/null 2>"$T/other.err" || fail "stat with the other config: $(cat "$T/other.err")"
grep -qF "the segment at $live was made from $T/live.ini, not $T/other.ini" "$T/other.err" ||
	fail "stat did not say the segment serves another config: $(cat "$T/other.err")"
"$SLUICE" stat -c "$T/live.ini" >"$T/stat.out" || fail "stat"
grep -qE "^segment: $live \(id [0-9a-f]{16}, 1 processes attached\), the running daemon's$" "$T/stat.out" ||
	fail "stat does not say which segment is used here: $(head -3 "$T/stat.out")"

# --- remove the unused: the one left behind and the dead socket go, the live stays ---
"$SLUICE" segments -c "$T/left.ini" --remove-unused >"$T/rm1" || fail "--remove-unused: $(cat "$T/rm1")"
grep -qx "removed $SEG: its keeper stopped; programs attached keep the segment until they exit" "$T/rm1" ||
	fail "--remove-unused: $(cat "$T/rm1")"
grep -qx "removed $dead (nobody answered on it)" "$T/rm1" || fail "--remove-unused: $(cat "$T/rm1")"
grep -qx "2 removed" "$T/rm1" || fail "--remove-unused removed more or less than two: $(cat "$T/rm1")"
[ -e "$SEG" ] && fail "the unused segment's socket is still there"
for _ in $(seq 20); do alive "$keeper" || break; sleep 0.1; done
alive "$keeper" && fail "its keeper still runs: $(ps -o pid,stat,args -p "$keeper")"
"$SLUICE" stat -c "$T/live.ini" >/dev/null || fail "the live daemon's segment went with it"
echo "ok"
