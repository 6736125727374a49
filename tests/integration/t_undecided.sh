#!/usr/bin/env bash
# tier: parallel
# When the segment cannot decide, the fallback policy does - never "go" (F3, F4):
#  - the lock held by a live process that does not let go (as a stopped holder
#    would): with fallback = local (the default), three threads connecting at once
#    keep waiting for the shared queue - nothing reaches the destination while the
#    lock is stuck, they go at the rate once it is free, and a section whose
#    max_wait runs out first refuses them; fallback = closed refuses them at once
#    (a process limiting itself alone, as local once did, let three through where
#    the rate allowed one);
#  - a full holder table under a concurrency limit: no place can be recorded, so
#    none is taken - the connect waits for room and is refused at max_wait, and the
#    destination sees no connection.
# Each is counted as undecided in `sluice stat`.  Witness: kernel SYN timestamps.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/u.ini" <<EOF
[slow]
match = 127.0.0.1:$PORT
rate = 2/s
max_wait = 1m

[slow-short]
match = 127.0.0.3:$PORT
rate = 2/s
max_wait = 1s

[two-at-once]
match = 127.0.0.2:$PORT
concurrency = 2
max_wait = 1s
EOF
start_daemon "$T/u.ini"

# hold_lock: a live process writes its own token and nonce into the lock word and
# sleeps: a holder that never releases.  Sets HOLDER.
hold_lock() {
	python3 - "$SEG" <<'EOF' &
import os, struct, sys, time
sys.path.insert(0, os.environ["HELPERS"]); import segment
with segment.Segment(sys.argv[1]) as f:
    f.seek(segment.LOCK_OFFSET); f.write(struct.pack("<Q", f.nonce << 32 | f.token))
time.sleep(120)
EOF
	HOLDER=$!
	BG_PIDS+=($HOLDER)
	sleep 0.5
}
release_lock() {
	kill "$HOLDER"; wait "$HOLDER" 2>/dev/null
	python3 -c 'import os, sys; sys.path.insert(0, os.environ["HELPERS"]); import segment
f = segment.Segment(sys.argv[1]); f.seek(48); f.write(bytes(8))' "$SEG"
}
threads3() { # FALLBACK [ADDR]: three threads connect at once; prints what each got
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" SLUICE_FALLBACK="$1" SLUICE_DEBUG=1 \
		SLUICE_LOG="$T/shim.log" timeout 60 python3 - "$PORT" "${2:-127.0.0.1}" <<'EOF'
import socket, sys, threading
port, addr, got = int(sys.argv[1]), sys.argv[2], []
def one():
    try:
        socket.create_connection((addr, port), timeout=20).close(); got.append("ok")
    except OSError as e:
        got.append(type(e).__name__)
ts = [threading.Thread(target=one) for _ in range(3)]
[t.start() for t in ts]; [t.join() for t in ts]
print(" ".join(sorted(got)))
EOF
}

hold_lock
start_syn_witness "$PORT" "$T/syn-local.log"
threads3 local >"$T/local.out" &
client=$!
sleep 3.5 # nearly two rounds of the lock's bound: they must still be waiting
[ ! -s "$T/syn-local.log" ] || fail "fallback = local: a connection went while the lock was stuck"
freed=$(date +%s%N)
release_lock
wait "$client" || fail "fallback = local: the client failed"
sleep 0.3; kill "$WITNESS_PID"
[ "$(cat "$T/local.out")" = "ok ok ok" ] || fail "fallback = local: $(cat "$T/local.out")"
grep -q "undecided (segment lock unavailable); fallback = local: waits for the shared queue" "$T/shim.log" ||
	fail "no undecided line: $(tail -5 "$T/shim.log")"
python3 "$HELPERS/arrivals.py" "$T/syn-local.log" --interval-ms 500 --expect 3 --what "local-fallback connects" ||
	fail "fallback = local let them through unshaped"
first=$(sort -n "$T/syn-local.log" | head -1 | cut -d' ' -f1)
[ "$first" -ge "$freed" ] || fail "fallback = local: a connection went $(((freed - first) / 1000000)) ms before the lock was free"

# A lock that stays stuck past max_wait (1 s here): refused, nothing sent.
hold_lock
start_syn_witness "$PORT" "$T/syn-short.log"
start=$(now_ms)
got=$(threads3 local 127.0.0.3) || fail "fallback = local, short max_wait: the client failed"
took=$(($(now_ms) - start))
sleep 0.3; kill "$WITNESS_PID"
[ "$got" = "ConnectionRefusedError ConnectionRefusedError ConnectionRefusedError" ] ||
	fail "fallback = local past max_wait: $got"
[ ! -s "$T/syn-short.log" ] || fail "fallback = local past max_wait: a connection reached the destination"
[ "$took" -lt 10000 ] || fail "fallback = local past max_wait: refused only after $took ms"
note "stuck lock past a 1 s max_wait: all three refused after $took ms, none sent"

start_syn_witness "$PORT" "$T/syn-closed.log"
got=$(threads3 closed) || fail "fallback = closed: the client failed"
sleep 0.3; kill "$WITNESS_PID"
[ "$got" = "ConnectionRefusedError ConnectionRefusedError ConnectionRefusedError" ] || fail "fallback = closed: $got"
[ ! -s "$T/syn-closed.log" ] || fail "fallback = closed: a connection reached the destination"
release_lock
"$SLUICE" stat -c "$T/u.ini" --json >"$T/s.json"
[ "$(json_field "$T/s.json" slow undecided)" -ge 6 ] || fail "undecided calls not counted: $(cat "$T/s.json")"
note "lock held by a live process: 3 threads waited for it (local) and went at the rate, 3 refused when closed"

# A full holder table: every entry taken by a live process (this helper, under
# its own token, alive while the test runs), each naming a live section (the
# first, by its serial) so the daemon's reaper leaves it there.
python3 - "$SEG" "$T/full.ready" <<'EOF' &
import os, struct, sys, time
sys.path.insert(0, os.environ["HELPERS"]); import segment
with segment.Segment(sys.argv[1]) as f:
    f.seek(4096 + 4)                  # sections[0].serial
    serial = struct.unpack("<I", f.read(4))[0]
    at = segment.layout(f)
    f.seek(at["holders"])
    f.write(struct.pack("<iIII", f.token, 0, serial, 0) * at["max_holders"])
    open(sys.argv[2], "w").write("x")
    time.sleep(60)
EOF
BG_PIDS+=($!)
for _ in $(seq 50); do [ -s "$T/full.ready" ] && break; sleep 0.1; done
start_syn_witness "$PORT" "$T/syn-conc.log"
start=$(now_ms)
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" timeout 30 python3 - "$PORT" <<'EOF' || fail "full holder table"
import socket, sys
try:
    socket.create_connection(("127.0.0.2", int(sys.argv[1])), timeout=10).close()
    sys.exit("a connect went with no concurrency place recorded")
except ConnectionRefusedError:
    pass
EOF
took=$(($(now_ms) - start))
sleep 0.3; kill "$WITNESS_PID"
[ ! -s "$T/syn-conc.log" ] || fail "full holder table: a connection reached the destination"
[ "$took" -ge 900 ] || fail "full holder table: refused after $took ms, before max_wait"
"$SLUICE" stat -c "$T/u.ini" --json >"$T/s.json"
[ "$(json_field "$T/s.json" two-at-once undecided)" -ge 1 ] || fail "the full table was not counted"
note "full holder table: refused after $took ms (max_wait 1 s), nothing reached the destination"
echo "ok"
