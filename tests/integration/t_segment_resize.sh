#!/usr/bin/env bash
# tier: parallel
# F7: truncating the segment (`truncate -s 0 /dev/shm/sluice`) once killed every
# attached program with SIGBUS, and the daemon.  The segment is now a memfd sealed
# against shrinking and growing (src/core/shm.c): whoever is handed it may write
# it, never resize it.  Checked here: no file in /dev/shm to truncate, the memfd
# handed over refuses both sizes and more seals, and removing it while programs
# use it (`sluice segments --remove`: its keeper stops) kills nobody - they keep
# their shared queue, spaced at the destination - while the daemon says so and
# keeps it served; programs started while no keeper serves it wait for it and
# join the queue once it is served again - and give back the concurrency places
# they take there (a deferred connect once gave its place back under the
# stand-in's serial, so it stayed taken while the program lived and every other
# connect waited for it).
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/r.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
rate = 10/s
concurrency = 1
EOF
start_daemon "$T/r.ini"
[ ! -e "/dev/shm/${SHM_NAME#/}" ] || fail "the segment is a file in /dev/shm, which anyone with write access can truncate"
python3 - "$SEG" <<'EOF' || fail "the segment could be had at another size"
import errno, fcntl, os, sys
sys.path.insert(0, os.environ["HELPERS"]); import segment
line, fd = segment.ask(sys.argv[1], "attach rw %d 0 0" % os.getpid())
assert line.startswith("ok") and fd is not None, line
size = os.fstat(fd).st_size
for want in (0, size // 2, size + 4096):
    try:
        os.ftruncate(fd, want)
        sys.exit("ftruncate to %d succeeded" % want)
    except OSError as e:
        assert e.errno == errno.EPERM, e
try:
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_WRITE)
    sys.exit("a seal could be added")
except OSError as e:
    assert e.errno == errno.EPERM, e
assert os.fstat(fd).st_size == size
EOF

# Two shimmed clients, 3 s each of connects as fast as they are released; the
# segment is removed 1 s in.  Arrivals are witnessed by the kernel's SYN stamps.
start_syn_witness "$PORT" "$T/syn.log"
for i in 1 2; do
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout -s KILL 20 python3 - "$PORT" >"$T/c$i.out" 2>&1 <<'EOF' &
import socket, sys, time
end, n = time.monotonic() + 3, 0
while time.monotonic() < end:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10).close()
    n += 1
print("done", n)
EOF
	eval "C$i=\$!"
done
sleep 1
"$SLUICE" segments --remove "$SEG" >"$T/rm.out" || fail "sluice segments --remove: $(cat "$T/rm.out")"
# Two more clients started at once, while no keeper serves the segment - one
# connecting blocking, one non-blocking (python's timeout: a deferred connect):
# each waits for the shared queue (its first calls may be refused: it tries
# again), never counting on its own, and joins the queue once the daemon serves
# it again: three connects at least once there, each place given back.
for i in 3 4; do
	LD_PRELOAD="$PRELOAD" SLUICE_CONFIG="$T/r.ini" timeout -s KILL 20 python3 - "$PORT" $((i - 3)) \
		>"$T/c$i.out" 2>&1 <<'EOF' &
import socket, sys, time
start, n, refused = time.monotonic(), 0, 0
while (time.monotonic() < start + 3 or n < 3) and time.monotonic() < start + 14:
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10 if sys.argv[2] == "1" else None)
        s.close()
        n += 1
    except OSError:
        refused += 1
        time.sleep(0.05)
print("done", n, refused)
EOF
	eval "C$i=\$!"
done
wait "$C1"; rc1=$?
wait "$C2"; rc2=$?
for i in 3 4; do
	eval "wait \$C$i" || fail "a client started in the gap died: $(cat "$T/c$i.out")"
	grep -qE "^done ([3-9]|[1-9][0-9]+) " "$T/c$i.out" ||
		fail "a client started in the gap did not make three connects in the queue: $(cat "$T/c$i.out")"
done
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] || fail "a client died after the segment was removed: $rc1 $rc2 ($(cat "$T"/c?.out))"
grep -q done "$T/c1.out" && grep -q done "$T/c2.out" || fail "a client did not finish: $(cat "$T"/c?.out)"
"$SLUICE" stat -c "$T/r.ini" >"$T/open.out" 2>&1
grep -q "concurrency 1, 0 open" "$T/open.out" || fail "a place is still counted open with every client gone: $(cat "$T/open.out")"
sleep 0.5
kill "$WITNESS_PID"; wait "$WITNESS_PID" 2>/dev/null
python3 "$HELPERS/arrivals.py" "$T/syn.log" --interval-ms 100 --at-least 25 \
	--what "SYNs of four clients sharing a removed segment" || fail "the shared queue broke when the segment was removed"
sleep 1.5 # the daemon's look at its keeper
grep -q "its keeper at $SEG was gone: started another" "$T/sluiced.log" ||
	fail "the daemon did not notice: $(tail -3 "$T/sluiced.log")"
kill -0 "$DAEMON_PID" || fail "the daemon died"

# --- a restart with other table sizes: the kept segment is made to the config's
# sizes, its state carried, when no program is on it; kept as it is while one is
# (docs/commands.md "Segments") ---
admitted=$("$SLUICE" stat -c "$T/r.ini" --json | python3 -c 'import json,sys; print([s for s in json.load(sys.stdin)["sections"] if s["name"] == "api"][0]["admitted"])')
stop_daemon
sed -i '1a keys = 40' "$T/r.ini"
start_daemon "$T/r.ini"
grep -q "made anew to the config's sizes: no program was attached" "$T/sluiced.log" ||
	fail "a restart with keys = 40 did not remake the unused segment: $(tail -3 "$T/sluiced.log")"
"$SLUICE" stat -c "$T/r.ini" --json >"$T/k40.json" || fail "stat"
[ "$(json_field "$T/k40.json" - max_keys)" -eq 40 ] || fail "max_keys after the restart: $(json_field "$T/k40.json" - max_keys)"
[ "$(json_field "$T/k40.json" api admitted)" -ge "$admitted" ] ||
	fail "the remade segment lost the state: admitted $(json_field "$T/k40.json" api admitted), was $admitted"
# A program on it: the next restart with other sizes keeps it (its queues stay one).
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout -s KILL 30 python3 -c '
import socket, sys, time
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10).close()
print("attached", flush=True)
time.sleep(25)' "$PORT" >"$T/stay.out" 2>&1 &
stay=$!
BG_PIDS+=($stay)
for _ in $(seq 50); do grep -q attached "$T/stay.out" && break; sleep 0.1; done
grep -q attached "$T/stay.out" || fail "the staying program did not connect: $(cat "$T/stay.out")"
stop_daemon
sed -i 's/^keys = 40$/keys = 80/' "$T/r.ini"
start_daemon "$T/r.ini"
grep -q "keeps its tables (.*40 keys; the config asks for .*80): programs still attached share it" "$T/sluiced.log" ||
	fail "a restart under a program remade its segment: $(tail -3 "$T/sluiced.log")"
[ "$(json_field <("$SLUICE" stat -c "$T/r.ini" --json) - max_keys)" -eq 40 ] || fail "max_keys changed under a program"
kill "$stay"
echo "ok"
