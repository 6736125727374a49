#!/usr/bin/env bash
# tier: parallel
# Who holds what, whatever the pid namespace (docs/design.md, "Who holds what"):
# holders and lock owners are roster tokens, ended by the keeper's pidfd when the
# kernel says the process exited - never pids read in /proc, which in a pod mean
# other processes.  A pod's process (pid 2 or so in its namespace, where pid 2 on
# the host is kthreadd) holds:
#  - a concurrency place, alive: the daemon keeps it (no third connection is let
#    open against concurrency = 1 while it holds), and killed -9: it is freed;
#  - the segment lock, killed -9 inside: taken over at once, and a daemon
#    started on the segment starts;
# and without any namespace, a durable quota is never exceeded while the daemon
# is down, with its keeper or without.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pod_lib.sh"

[ "$(id -u)" -eq 0 ] || fail "needs root (namespaces)"
python3 "$HELPERS/sink.py" "$T/hold.port" 120 hold &
BG_PIDS+=($!)
for _ in $(seq 100); do [ -s "$T/hold.port" ] && break; sleep 0.1; done
HOLD_PORT=$(cat "$T/hold.port")
start_server
write_config "$T/h.ini" <<EOF
[one-at-a-time]
match = 127.0.0.1:$HOLD_PORT
concurrency = 1
max_wait = 1s

[api]
match = 127.0.0.1:$PORT
rate = 1/m
max_wait = 0
EOF
start_daemon "$T/h.ini"
open_places() { "$SLUICE" stat -c "$T/h.ini" --json | python3 -c 'import json, sys
print([s for s in json.load(sys.stdin)["sections"] if s["name"] == "one-at-a-time"][0]["open"])'; }
try_place() { # MAX_WAIT: a host connect to the held port; prints went or refused
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 30 python3 -c 'import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20).close(); print("went")
except ConnectionRefusedError:
    print("refused")' "$HOLD_PORT"
}

# --- a live holder in a pod keeps its place ---
pod "$T" env LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="/run/sluice/${SEG##*/}" python3 -c 'import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
open(sys.argv[2], "w").write("%d\n" % os.getpid())
time.sleep(60)' "$HOLD_PORT" "$T/holder.pid" &
pod_job=$!
BG_PIDS+=($pod_job)
for _ in $(seq 100); do [ -s "$T/holder.pid" ] && break; sleep 0.1; done
[ -s "$T/holder.pid" ] || fail "the pod's holder did not connect"
note "the holder is pid $(cat "$T/holder.pid") in its pid namespace"
sleep 1.5 # the daemon's heartbeats reap what dead processes held: not this
[ "$(open_places)" = 1 ] || fail "the live holder's place was not kept: $(open_places) open"
[ "$(try_place)" = refused ] || fail "a second connection went open against concurrency = 1"
[ "$(open_places)" = 1 ] || fail "the live holder in a pod lost its place: $(open_places) open"

# --- killed -9 in its pod: its place is freed ---
holder=$(pgrep -f "^python3 -c import os, socket, sys, time" | head -1)
[ -n "$holder" ] || fail "no host pid for the pod's holder"
kill -9 "$holder"
start=$(now_ms)
for _ in $(seq 30); do [ "$(open_places)" = 0 ] && break; sleep 0.1; done
took=$(($(now_ms) - start))
[ "$(open_places)" = 0 ] || fail "the place of a holder killed in a pod was not freed"
note "a holder killed -9 in a pod: its place freed in $took ms"
[ "$(try_place)" = went ] || fail "the freed place could not be taken"

# --- a lock holder killed -9 in a pod: taken over; a daemon started on it starts ---
wedge_in_pod() { # a pod process writes its own token and nonce in the lock word and is killed -9
	rm -f "$T/wedged"
	pod "$T" python3 - "/run/sluice/${SEG##*/}" "$T/wedged" <<'EOF' &
import os, struct, sys, time
sys.path.insert(0, os.environ["HELPERS"]); import segment
with segment.Segment(sys.argv[1]) as f:
    f.seek(segment.LOCK_OFFSET); f.write(struct.pack("<Q", f.nonce << 32 | f.token))
    open(sys.argv[2], "w").write("%d %d\n" % (os.getpid(), f.token))
    time.sleep(60)
EOF
	BG_PIDS+=($!)
	for _ in $(seq 100); do [ -s "$T/wedged" ] && break; sleep 0.1; done
	[ -s "$T/wedged" ] || fail "the pod's lock holder did not start"
	note "lock holder: pid $(cut -d' ' -f1 "$T/wedged") in its pid namespace, token $(cut -d' ' -f2 "$T/wedged")"
	pkill -9 -f "segment.Segment(sys.argv\[1\]) as f" || pkill -9 -f "^python3 - /run/sluice/" ||
		fail "no host pid for the pod's lock holder"
	sleep 0.3
}
wedge_in_pod
start=$(now_ms)
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 20 python3 -c 'import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10).close()' "$PORT" ||
	fail "a connect after the pod's lock holder was killed failed"
took=$(($(now_ms) - start))
note "a lock holder killed -9 in a pod: the next call took the lock over in $took ms"
[ "$took" -lt 1500 ] || fail "the dead pod holder's lock held the call $took ms"
"$SLUICE" stat -c "$T/h.ini" --json >"$T/s.json"
[ "$(json_field "$T/s.json" - lock_recoveries)" -ge 1 ] || fail "the recovery was not counted"
stop_daemon
wedge_in_pod
: >"$T/sluiced.log"
start_daemon "$T/h.ini"
grep -q "lock unavailable" "$T/sluiced.log" && fail "the restarted daemon found the lock unavailable"
python3 - "$SEG" <<'PY' || fail "the restarted daemon left the dead pod holder's lock word"
import os, struct, sys
sys.path.insert(0, os.environ["HELPERS"]); import segment
with segment.Segment(sys.argv[1], enter=False) as f:
    f.seek(segment.LOCK_OFFSET); word = struct.unpack("<Q", f.read(8))[0]
sys.exit(0 if word == 0 else 1)
PY

# --- a durable quota while the daemon is down: never exceeded ---
stop_daemon
python3 "$HELPERS/segment.py" remove "$SEG"
mkdir -p "$T/state"
write_config "$T/q.ini" <<EOF
state_dir = $T/state

[daily]
match = 127.0.0.1:$PORT
rate = 20/d
strategy = fixed-window
max_wait = 1s
EOF
start_daemon "$T/q.ini"
start_syn_witness "$PORT" "$T/syns.q"
burst() { # N: N connects, each from a process of its own; prints how many went
	local went=0
	for _ in $(seq "$1"); do
		LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" SLUICE_CONFIG="$T/q.ini" curl -s -o /dev/null --max-time 20 \
			"http://127.0.0.1:$PORT/q" 2>>"$T/burst.err" && went=$((went + 1))
	done
	echo $went
}
a=$(burst 12)
kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null
b=$(burst 15) # the keeper serves the segment: what the quota granted it, no more
keeper=$(python3 -c 'import os, sys; sys.path.insert(0, os.environ["HELPERS"]); import segment
print(segment.value(segment.ask(sys.argv[1], "info")[0], "pid"))' "$SEG")
kill -9 "$keeper"
c=$(burst 5) # nothing serves it: refused after max_wait, never counted alone
sleep 0.3
got=$(wc -l <"$T/syns.q")
note "a 20/d quota: $a went with the daemon, $b with it down, $c with its keeper gone too; $got at the destination"
[ "$c" = 0 ] || fail "with no segment to be had, $c connects went"
[ "$got" -le 20 ] || fail "$got connects reached the destination against a quota of 20 a day"
[ "$got" -eq $((a + b + c)) ] || fail "the destination saw $got, the clients said $((a + b + c))"
start_daemon "$T/q.ini"
sleep 5.5 # the new segment's hold (its keeper was lost: SL_ORPHAN_HOLD_NS)
d=$(burst 15)
sleep 0.3
got=$(wc -l <"$T/syns.q")
note "after a restart: $d more; $got in all"
[ "$got" -le 20 ] || fail "$got connects in all against a quota of 20 a day"
echo "ok"
