#!/usr/bin/env bash
# tier: parallel
# A keeper that is there but busy (docs/design.md, "Never a silent split"): a
# program given only SLUICE_SEGMENT (no config to say what matches) whose first
# ask for the segment is not answered in time waits for the keeper, and is
# shaped once it answers - where it used to shape nothing for the rest of its
# life (one client of 200 daemons starting on two cores went unshaped at its
# own 10/s: 110/s at the destination of a fleet sharing 100/s).  The keeper is
# stopped (SIGSTOP) for 1.5 s while the client starts: its socket takes the
# connection and answers nothing; two threads of the client ask at once, and
# both wait.  Nothing listening at all is no daemon, and is not waited for.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/busy.ini" <<EOF2
[api]
match = 127.0.0.1:$PORT
rate = 2/s
max_wait = 30s
EOF2
start_daemon "$T/busy.ini"
keeper=$(python3 -c 'import os, sys; sys.path.insert(0, os.environ["HELPERS"]); import segment
print(segment.value(segment.ask(sys.argv[1], "info")[0], "pid"))' "$SEG")
[ -n "$keeper" ] && alive "$keeper" || fail "no keeper answers at $SEG"
start_syn_witness "$PORT" "$T/syns"

client() { # two threads of three connections each, begun together; a missing config: nothing says what matches
	env LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$1" SLUICE_CONFIG="$T/no-such.ini" python3 -c '
import socket, sys, threading
def three():
    for i in range(3):
        socket.create_connection(("127.0.0.1", int(sys.argv[1]))).close()
ts = [threading.Thread(target=three) for _ in range(2)]
for t in ts: t.start()
for t in ts: t.join()' "$PORT"
}

kill -STOP "$keeper"
(sleep 1.5; kill -CONT "$keeper") &
start=$(now_ms)
client "$SEG" 2>"$T/client.err" || { kill -CONT "$keeper"; cat "$T/client.err"; fail "the client failed"; }
kill -CONT "$keeper"
took=$(($(now_ms) - start))
cat "$T/client.err"
[ "$(grep -c "did not answer in time; waiting for them" "$T/client.err")" -eq 1 ] ||
	fail "the wait was not said once"
grep -q "reached the shared queues" "$T/client.err" || fail "the keeper's answer was not said"
grep -q "nothing is" "$T/client.err" && fail "the client gave up on a busy keeper"
expect_spaced "$T/syns" 500 6 "a client that waited for a busy keeper"
[ "$took" -ge 1500 ] || fail "the client ended in $took ms: it did not wait for the stopped keeper"

# Nothing listening: no daemon; said at once, and the calls go unshaped.
start=$(now_ms)
client "$T/nobody.segment" 2>"$T/none.err" || { cat "$T/none.err"; fail "the client failed with no keeper"; }
took=$(($(now_ms) - start))
grep -q "cannot reach the shared queues at $T/nobody.segment, and no config" "$T/none.err" ||
	fail "no keeper, no config: not said: $(cat "$T/none.err")"
[ "$took" -lt 10000 ] || fail "with no keeper at all the client waited $took ms (it must not wait the 30 s a busy keeper is given)"
echo "ok"
