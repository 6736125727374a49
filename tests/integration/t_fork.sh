#!/usr/bin/env bash
# tier: parallel
# Fork: children of a shaped process share the queue with it (the segment mapping
# and the environment are inherited), each with its own identity for the lock.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/f.ini" <<EOF
[q]
match = 127.0.0.1:$PORT
rate = 10/s
EOF
start_witness syn "$PORT" "$T/arrivals"
SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" "$SLUICE" run -c "$T/f.ini" -- python3 - "$PORT" <<'EOF' || fail "forking client failed"
import os, socket, sys
port = int(sys.argv[1])
def hit(tag):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /%s HTTP/1.0\r\n\r\n" % tag.encode())
    assert b"200 OK" in s.recv(4096)
    s.close()
hit("parent")
kids = []
for k in range(4):
    pid = os.fork()
    if pid == 0:
        for i in range(3):
            hit("kid%d-%d" % (k, i))
        os._exit(0)
    kids.append(pid)
hit("parent2")
bad = [p for p in kids if os.waitpid(p, 0)[1] != 0]
sys.exit(1 if bad else 0)
EOF
[ "$(wc -l <"$SERVER_LOG")" -eq 14 ] || fail "server saw $(wc -l <"$SERVER_LOG") requests, not 14"
pids=$(grep ': go' "$T/shim.log" | sed 's/^sluice\[\([0-9]*\)\].*/\1/' | sort -u | wc -l)
[ "$pids" -eq 5 ] || fail "releases came from $pids processes, expected 5"
witnessed "$T/arrivals" --interval-ms 100 --expect 14 --what connects || fail "spacing across fork"
