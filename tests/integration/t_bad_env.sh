#!/usr/bin/env bash
# tier: parallel
# Bad environment and bad segments: the host program runs as without the shim (or
# with its documented fallback), never crashes, and SLUICE_DEBUG says why.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/e.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
rate = 1/m
max_wait = 0
EOF
url="http://127.0.0.1:$PORT"
# run_curl N ENV...: N sequential curls under the shim; prints how many succeeded.
run_curl() {
	local n=$1 ok=0
	shift
	for i in $(seq "$n"); do
		env LD_PRELOAD="$PRELOAD" "$@" curl -s -o /dev/null --max-time 20 "$url/e$i" && ok=$((ok + 1))
	done
	echo $ok
}
expect_ok() { # N ENV...: all N connections go through, unshaped
	local got
	got=$(run_curl "$@")
	[ "$got" -eq "$1" ] || fail "with ${*:2}: $got of $1 connections went through"
}

# Nonsense in every variable: nothing to attach, nothing to load -> pass through
# (with no config, nothing says what is shaped: said once on stderr).
long=$(printf '/%05000d' 0)
expect_ok 3 SLUICE_SEGMENT=none
expect_ok 3 SLUICE_SEGMENT=no-slash SLUICE_CONFIG=/nonexistent/sluice.ini
expect_ok 3 SLUICE_SEGMENT="$long" SLUICE_CONFIG="$long"
expect_ok 3 SLUICE_SEGMENT= SLUICE_CONFIG= SLUICE_DEBUG=yes SLUICE_LOG=/nonexistent/dir/log
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$T/none.segment" SLUICE_CONFIG=/nonexistent/sluice.ini \
	curl -s -o /dev/null "$url/told" 2>"$T/told.err" || fail "no segment, no config: the call failed"
grep -q "^sluice: cannot reach the shared queues at $T/none.segment, and no config (SLUICE_CONFIG) says what is shaped: nothing is$" \
	"$T/told.err" || fail "no segment, no config: not told on stderr: $(cat "$T/told.err")"
expect_ok 3 SLUICE_SEGMENT=none SLUICE_CONFIG="$T" SLUICE_FALLBACK=sideways
# Files that are no config: a device, a FIFO nobody writes, random bytes, a file
# over 16 MiB.  Each would hang or exhaust a reader; the host runs unshaped at once.
mkfifo "$T/fifo"
truncate -s 17M "$T/huge.ini"
for f in /dev/zero "$T/fifo" /dev/urandom "$T/huge.ini"; do
	start=$(now_ms)
	expect_ok 1 SLUICE_SEGMENT=none SLUICE_CONFIG="$f"
	took=$(($(now_ms) - start))
	[ "$took" -lt 5000 ] || fail "SLUICE_CONFIG=$f held the host $took ms"
done
SLUICE_DEBUG=1 LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT=none SLUICE_CONFIG="$T/fifo" \
	timeout 10 true 2>"$T/fifo.err" || fail "SLUICE_CONFIG=FIFO: the host did not run"
grep -q "fifo: not a regular file" "$T/fifo.err" || fail "SLUICE_DEBUG did not explain the FIFO: $(cat "$T/fifo.err")"
printf '[api]\nmatch = 127.0.0.1:%s\nrate = fast\n' "$PORT" >"$T/broken.ini"
expect_ok 3 SLUICE_SEGMENT=none SLUICE_CONFIG="$T/broken.ini"
SLUICE_DEBUG=1 LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT=none SLUICE_CONFIG="$T/broken.ini" \
	curl -s -o /dev/null "$url/dbg" 2>"$T/dbg.err"
grep -q "broken.ini:3: rate: bad rate" "$T/dbg.err" || fail "SLUICE_DEBUG did not explain: $(cat "$T/dbg.err")"

# With no daemon by design (SLUICE_SEGMENT=none, as control_socket = none) and
# fallback = local (the default): each process limits itself from SLUICE_CONFIG.
[ "$(run_curl 3 SLUICE_SEGMENT=none SLUICE_CONFIG="$T/e.ini")" -eq 3 ] ||
	fail "fallback local: separate processes should each get their first connection"
out=$(LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT=none SLUICE_CONFIG="$T/e.ini" python3 -c '
import socket, sys
p = int(sys.argv[1])
socket.create_connection(("127.0.0.1", p)).close()
try:
    socket.create_connection(("127.0.0.1", p)); print("second went")
except ConnectionRefusedError:
    print("refused")
' "$PORT")
[ "$out" = "refused" ] || fail "fallback local did not limit within the process: $out"

# fallback = closed (from the config, or SLUICE_FALLBACK): every matched connect refused.
sed 's/^\[api\]/[sluice]\nfallback = closed\n\n[api]/' "$T/e.ini" >"$T/closed.ini"
got=$(run_curl 2 SLUICE_SEGMENT=none SLUICE_CONFIG="$T/closed.ini")
[ "$got" -eq 0 ] || fail "fallback closed let $got through"
got=$(run_curl 2 SLUICE_SEGMENT=none SLUICE_CONFIG="$T/e.ini" SLUICE_FALLBACK=closed)
[ "$got" -eq 0 ] || fail "SLUICE_FALLBACK=closed let $got through"
# fallback = open: nothing shaped.
expect_ok 3 SLUICE_SEGMENT=none SLUICE_CONFIG="$T/e.ini" SLUICE_FALLBACK=open

# Segments a server hands over that are not to be used: too small, garbage, a
# future layout version, a memfd or a file that could be shrunk under the mapping
# (SIGBUS), none at all, a reply that is none (helpers/bad_segment.py; the right
# size for each, from the daemon's own segment).  The program runs as without the
# shim (no config says what matches), and SLUICE_DEBUG says why.
start_daemon "$T/e.ini"
size=$(python3 -c 'import os, sys; sys.path.insert(0, os.environ["HELPERS"]); import segment
print(segment.Segment(sys.argv[1]).size)' "$SEG")
stop_daemon
for kind in small:version junk:version future:version unsealed:resizing file:resizing nofd:version garbage:version; do
	why=${kind#*:}
	kind=${kind%%:*}
	python3 "$HELPERS/bad_segment.py" "$T/bad-$kind.segment" "$kind" "$size" "$T/bad-$kind.ready" &
	BG_PIDS+=($!)
	for _ in $(seq 50); do [ -s "$T/bad-$kind.ready" ] && break; sleep 0.1; done
	expect_ok 2 SLUICE_SEGMENT="$T/bad-$kind.segment" SLUICE_CONFIG=/nonexistent/sluice.ini
	SLUICE_DEBUG=1 LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$T/bad-$kind.segment" SLUICE_CONFIG=/nonexistent/sluice.ini \
		curl -s -o /dev/null "$url/d" 2>"$T/dbg.err"
	grep -q "cannot attach the segment at $T/bad-$kind.segment: .*$why" "$T/dbg.err" ||
		fail "$kind segment: $(cat "$T/dbg.err")"
	# With the config: what matches waits for a usable segment and is refused
	# (max_wait 0 here), never let through nor limited by its process alone.
	[ "$(run_curl 2 SLUICE_SEGMENT="$T/bad-$kind.segment" SLUICE_CONFIG="$T/e.ini")" -eq 0 ] ||
		fail "$kind segment: a matched connect went through"
done

# A valid segment scribbled on while processes use it: no crash, ever.
start_daemon "$T/e.ini"
python3 - "$SEG" <<'EOF' &
import os, sys, time
sys.path.insert(0, os.environ["HELPERS"]); import segment
end = time.time() + 3
with segment.Segment(sys.argv[1]) as f:
    while time.time() < end:
        f.seek(4096 + int.from_bytes(os.urandom(3), "little") % (f.size - 4096 - 64))
        f.write(os.urandom(64))
EOF
scribbler=$!
# Garbage may say "wait a year", so the client is bounded from outside; what must
# never happen is death by a signal of its own (SIGSEGV, SIGBUS, SIGABRT...).
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout -s KILL 8 python3 - "$PORT" <<'EOF'
import socket, sys, time
end = time.time() + 3
while time.time() < end:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
    except OSError:
        pass  # refusals are fine: the scribbled config may say anything
EOF
rc=$?
[ $rc -eq 0 ] || [ $rc -eq 137 ] || fail "a client died with status $rc on a scribbled segment"
wait $scribbler
# The scribbled run may have spent the section's one connection a minute, and a
# restarted daemon adopts the segment with its queues: the lock test below starts
# from a new segment (its keeper stopped) so that its connect is due at once.
stop_daemon
python3 "$HELPERS/segment.py" remove "$SEG"
start_daemon "$T/e.ini"
admitted=$(json_field <("$SLUICE" stat -c "$T/e.ini" --json) api admitted)
[ "$admitted" = 0 ] || fail "the new segment has admitted $admitted already"
# A lock word naming a registration that never took it (its writer's own token,
# another nonce): known not to be the holder, so taken over at once (t_lock_owner
# has more).
python3 - "$SEG" <<'EOF'
import os, struct, sys
sys.path.insert(0, os.environ["HELPERS"]); import segment
with segment.Segment(sys.argv[1]) as f:
    f.seek(segment.LOCK_OFFSET)
    f.write(struct.pack("<Q", (f.nonce ^ 12345) << 32 | f.token))
EOF
start=$(now_ms)
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 20 python3 -c '
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()' "$PORT" ||
	fail "connect with a stuck lock failed"
took=$(($(now_ms) - start))
note "connect with a lock word naming a live stranger took $took ms"
[ "$took" -lt 1500 ] || fail "a stranger's token in the lock word held the call $took ms"
