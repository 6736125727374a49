#!/usr/bin/env bash
# tier: parallel
# Lock ownership the kernel vouches for (F2, F6): the segment lock word holds the
# holder's roster token and its registration's nonce (src/core/roster.c).  A
# holder killed -9 but not yet reaped (a zombie) passes kill(pid, 0) yet holds
# nothing: its keeper's pidfd says it exited; a word with another nonce (a
# scribble, a stale word) is no holder's; nor is a word with no nonce (the value
# 1 once wedged every caller for good).  Either way the next caller takes the lock
# over at once, and is shaped: with rate 1/m and max_wait 0, its second connect
# is refused - the check ran, nothing passed through.  A daemon started on such a
# segment repairs it instead of exiting "lock unavailable".  (The same across pid
# namespaces: t_containers.)
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/l.ini" <<EOF
[once]
match = 127.0.0.1:$PORT
rate = 1/m
max_wait = 0
EOF

# wedge MODE: write a lock word into the segment.  zombie: a child's own token and
# nonce (it asks for the segment itself, so the keeper enters it in the roster),
# the child then killed -9 and left unreaped by a parent process whose pid is
# printed (it holds no file of ours open, and is killed at the end); stranger: a
# live registration's token with a nonce not its own (a scribble, or a word of an
# earlier registration of that entry); nostamp: the value 1, no nonce at all.
wedge() {
	python3 - "$SEG" "$1" <<'EOF'
import os, signal, struct, sys, time
sys.path.insert(0, os.environ["HELPERS"]); import segment
path, mode = sys.argv[1], sys.argv[2]

if mode in ("stranger", "nostamp"):
    with segment.Segment(path) as f:
        word = (f.nonce ^ 0x5a5a) << 32 | f.token if mode == "stranger" else 1
        f.seek(segment.LOCK_OFFSET); f.write(struct.pack("<Q", word))
        time.sleep(0.2)  # still alive while the word is read
    sys.exit(0)
r, w = os.pipe()
parent = os.fork()
if parent == 0:                         # the zombie's parent: never reaps it
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    child = os.fork()
    if child == 0:
        with segment.Segment(path) as f:
            f.seek(segment.LOCK_OFFSET); f.write(struct.pack("<Q", f.nonce << 32 | f.token))
        os.write(w, b"x")
        time.sleep(600)
    os.read(r, 1)
    os.kill(child, signal.SIGKILL)
    time.sleep(600)                      # the child stays a zombie while we sleep
    os._exit(0)
print(parent, flush=True)
time.sleep(0.5)
EOF
}

try_shaped() { # WHAT: two connects; the first goes, the second is refused, quickly
	local start took
	start=$(now_ms)
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" timeout 20 python3 - "$PORT" <<'EOF' || fail "$1: not shaped"
import socket, sys
port = int(sys.argv[1])
socket.create_connection(("127.0.0.1", port), timeout=5).close()
try:
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    sys.exit("the second connect went: the limit was not applied")
except ConnectionRefusedError:
    pass
EOF
	took=$(($(now_ms) - start))
	note "$1: shaped, two connects in $took ms"
	[ "$took" -lt 1500 ] || fail "$1: the dead holder's lock held the calls $took ms"
}

fresh() {
	[ -n "${DAEMON_PID:-}" ] && kill "$DAEMON_PID" 2>/dev/null && wait "$DAEMON_PID" 2>/dev/null
	python3 "$HELPERS/segment.py" remove "$SEG"
	start_daemon "$T/l.ini"
}

fresh
keeper=$(wedge zombie)
[ -n "$keeper" ] && BG_PIDS+=($keeper)
zombie=$(ps -o pid=,stat= --ppid "$keeper" | awk '$2 ~ /^Z/ {print $1}')
[ -n "$zombie" ] || fail "no zombie holder was made"
try_shaped "zombie holder"
"$SLUICE" stat -c "$T/l.ini" --json >"$T/s.json"
[ "$(json_field "$T/s.json" - lock_recoveries)" -ge 1 ] || fail "the recovery was not counted"

fresh
wedge stranger
try_shaped "a live token with another nonce"

fresh
wedge nostamp
try_shaped "a word with no nonce"

# Forever waiters behind a word with no nonce are not kept waiting, and nothing
# goes unshaped: 20 clients at 10/s are spaced at the destination.
cat >"$T/f.ini" <<EOF
[sluice]
shm_name = $SHM_NAME
control_socket = $CTL

[forever]
match = 127.0.0.1:$PORT
rate = 10/s
max_wait = forever
EOF
kill "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null
start_daemon "$T/f.ini"
start_syn_witness "$PORT" "$T/syns"
wedge nostamp
start=$(now_ms)
pids=()
for i in $(seq 20); do
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 20 python3 -c '
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10).close()' "$PORT" &
	pids+=($!)
done
wait "${pids[@]}" || fail "a client behind the unstamped word failed"
took=$(($(now_ms) - start))
note "20 clients at 10/s behind a word with no stamp: $took ms"
[ "$took" -lt 4500 ] || fail "20 connects at 10/s took $took ms"
witnessed "$T/syns" --interval-ms 100 --slack-ms 1 --expect 20 --what connects || fail "spacing behind the word"

# A daemon started on a segment with a wedged lock repairs it: another's stamp,
# and no stamp at all.
for mode in stranger nostamp; do
	kill "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null
	: >"$T/sluiced.log"
	wedge $mode
	start_daemon "$T/l.ini"
	grep -q "lock unavailable" "$T/sluiced.log" && fail "the restarted daemon found the lock unavailable ($mode)"
	python3 - "$SEG" <<'PY' || fail "the restarted daemon left the lock word set ($mode)"
import os, struct, sys
sys.path.insert(0, os.environ["HELPERS"]); import segment
with segment.Segment(sys.argv[1]) as f:
    f.seek(segment.LOCK_OFFSET); word = struct.unpack("<Q", f.read(8))[0]
sys.exit(0 if word == 0 else 1)
PY
done
echo "ok"
