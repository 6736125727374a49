#!/usr/bin/env bash
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

# Nonsense in every variable: nothing to attach, nothing to load -> pass through.
long=$(printf '/%05000d' 0)
expect_ok 3 SLUICE_SHM=/sluice-absent-$$
expect_ok 3 SLUICE_SHM=no-slash SLUICE_CONFIG=/nonexistent/sluice.ini
expect_ok 3 SLUICE_SHM="$long" SLUICE_CONFIG="$long"
expect_ok 3 SLUICE_SHM= SLUICE_CONFIG= SLUICE_DEBUG=yes SLUICE_LOG=/nonexistent/dir/log
expect_ok 3 SLUICE_SHM=/sluice-absent-$$ SLUICE_CONFIG="$T" SLUICE_FALLBACK=sideways
# Files that are no config: a device, a FIFO nobody writes, random bytes, a file
# over 16 MiB.  Each would hang or exhaust a reader; the host runs unshaped at once.
mkfifo "$T/fifo"
truncate -s 17M "$T/huge.ini"
for f in /dev/zero "$T/fifo" /dev/urandom "$T/huge.ini"; do
	start=$(now_ms)
	expect_ok 1 SLUICE_SHM=/sluice-absent-$$ SLUICE_CONFIG="$f"
	took=$(($(now_ms) - start))
	[ "$took" -lt 5000 ] || fail "SLUICE_CONFIG=$f held the host $took ms"
done
SLUICE_DEBUG=1 LD_PRELOAD="$PRELOAD" SLUICE_SHM=/sluice-absent-$$ SLUICE_CONFIG="$T/fifo" \
	timeout 10 true 2>"$T/fifo.err" || fail "SLUICE_CONFIG=FIFO: the host did not run"
grep -q "fifo: not a regular file" "$T/fifo.err" || fail "SLUICE_DEBUG did not explain the FIFO: $(cat "$T/fifo.err")"
printf '[api]\nmatch = 127.0.0.1:%s\nrate = fast\n' "$PORT" >"$T/broken.ini"
expect_ok 3 SLUICE_SHM=/sluice-absent-$$ SLUICE_CONFIG="$T/broken.ini"
SLUICE_DEBUG=1 LD_PRELOAD="$PRELOAD" SLUICE_SHM=/sluice-absent-$$ SLUICE_CONFIG="$T/broken.ini" \
	curl -s -o /dev/null "$url/dbg" 2>"$T/dbg.err"
grep -q "broken.ini:3: rate: bad rate" "$T/dbg.err" || fail "SLUICE_DEBUG did not explain: $(cat "$T/dbg.err")"

# fallback = local (the default): each process limits itself from SLUICE_CONFIG.
[ "$(run_curl 3 SLUICE_SHM=/sluice-absent-$$ SLUICE_CONFIG="$T/e.ini")" -eq 3 ] ||
	fail "fallback local: separate processes should each get their first connection"
out=$(LD_PRELOAD="$PRELOAD" SLUICE_SHM=/sluice-absent-$$ SLUICE_CONFIG="$T/e.ini" python3 -c '
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
got=$(run_curl 2 SLUICE_SHM=/sluice-absent-$$ SLUICE_CONFIG="$T/closed.ini")
[ "$got" -eq 0 ] || fail "fallback closed let $got through"
got=$(run_curl 2 SLUICE_SHM=/sluice-absent-$$ SLUICE_CONFIG="$T/e.ini" SLUICE_FALLBACK=closed)
[ "$got" -eq 0 ] || fail "SLUICE_FALLBACK=closed let $got through"
# fallback = open: nothing shaped.
expect_ok 3 SLUICE_SHM=/sluice-absent-$$ SLUICE_CONFIG="$T/e.ini" SLUICE_FALLBACK=open

# Segments that are not ours: wrong size, garbage, a future layout version (the
# right size for each, from the daemon's own segment).
start_daemon "$T/e.ini"
size=$(python3 -c 'import os, sys; sys.path.insert(0, os.environ["HELPERS"]); import segment
print(segment.Segment(sys.argv[1]).size)' "$SHM_NAME")
stop_daemon
python3 - "$SHM_NAME" "$size" <<'EOF'
import os, struct, sys
sys.path.insert(0, os.environ["HELPERS"]); import segment
base = sys.argv[1]
size = int(sys.argv[2])
def make(kind, data):
    with segment.Segment(base + "-" + kind, create=len(data)) as f:
        f.write(data)
make("small", b"SLCE" + b"\0" * 60)
make("junk", os.urandom(size))
hdr = struct.pack("<IHHQ", 0x45434c53, 99, 0, size)
make("future", hdr + b"\0" * (size - len(hdr)))
EOF
for kind in small junk future; do
	expect_ok 2 SLUICE_SHM="$SHM_NAME-$kind"
	SLUICE_DEBUG=1 LD_PRELOAD="$PRELOAD" SLUICE_SHM="$SHM_NAME-$kind" curl -s -o /dev/null "$url/d" 2>"$T/dbg.err"
	grep -q "not a sluice segment of this version" "$T/dbg.err" || fail "$kind segment: $(cat "$T/dbg.err")"
	python3 "$HELPERS/segment.py" remove "$SHM_NAME-$kind"
done

# A valid segment scribbled on while processes use it: no crash, ever.
start_daemon "$T/e.ini"
python3 - "$SHM_NAME" <<'EOF' &
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
LD_PRELOAD="$PRELOAD" SLUICE_SHM="$SHM_NAME" timeout -s KILL 8 python3 - "$PORT" <<'EOF'
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
# from a new segment (the old one removed) so that its connect is due at once.
stop_daemon
python3 "$HELPERS/segment.py" remove "$SHM_NAME"
start_daemon "$T/e.ini"
admitted=$(json_field <("$SLUICE" stat -c "$T/e.ini" --json) api admitted)
[ "$admitted" = 0 ] || fail "the new segment has admitted $admitted already"
# A lock word naming a live process that never took it (pid 1, another start
# stamp): known not to be the holder, so taken over at once (t_lock_owner has more).
python3 - "$SHM_NAME" <<'EOF'
import os, struct, sys
sys.path.insert(0, os.environ["HELPERS"]); import segment
with segment.Segment(sys.argv[1]) as f:
    f.seek(48)
    f.write(struct.pack("<Q", 12345 << 32 | 1))
EOF
start=$(now_ms)
LD_PRELOAD="$PRELOAD" SLUICE_SHM="$SHM_NAME" timeout 20 python3 -c '
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()' "$PORT" ||
	fail "connect with a stuck lock failed"
took=$(($(now_ms) - start))
note "connect with a lock word naming a live stranger took $took ms"
[ "$took" -lt 1500 ] || fail "a stranger's pid in the lock word held the call $took ms"
