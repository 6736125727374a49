#!/usr/bin/env bash
# tier: parallel
# Requests in flight (docs/config.md, "Requests in flight"): meter = requests with
# concurrency = 2 against a server that answers slowly.  Three python processes,
# each on one requests.Session (keep-alive), fetch answers streamed in chunks over
# 300 ms; then node's keep-alive agent sends eight at once.  The server's own log
# (each request's arrival, each answer's end) is the witness: never more than 2
# outstanding there, every request answered, and the limit used (2 at once).
# A connection closed with its request unanswered gives its place back.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/c.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
meter = requests
concurrency = 2
max_wait = 60s
EOF
"$SLUICE" check -c "$T/c.ini" >/dev/null || fail "concurrency with meter = requests was refused"
start_daemon "$T/c.ini"
log_lines() { if [ -f "$SERVER_LOG" ]; then wc -l <"$SERVER_LOG"; else echo 0; fi; }
# outstanding FROM: the most requests outstanding at the server after line FROM of
# its log, and how many were answered.
outstanding() {
	python3 - "$SERVER_LOG" "$1" <<'PY'
import sys
ev = []
for i, line in enumerate(open(sys.argv[1])):
    if i < int(sys.argv[2]):
        continue
    p = line.split()
    if len(p) == 2 and p[1].startswith(("/slow/", "/stream/")):
        ev.append((int(p[0]), 1))
    elif len(p) == 3 and p[1] == "end":
        ev.append((int(p[0]), -1))
ev.sort(key=lambda e: (e[0], e[1]))
n = peak = 0
for _, d in ev:
    n += d
    peak = max(peak, n)
print(peak, sum(1 for _, d in ev if d < 0))
PY
}

# --- python requests.Session, three processes ---
from=$(log_lines)
for i in 1 2 3; do
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 60 python3 - "$PORT" >"$T/py.$i" 2>&1 <<'PY' &
import requests, sys
s = requests.Session()
for _ in range(4):
    r = s.get("http://127.0.0.1:%s/stream/300" % sys.argv[1])
    print(r.status_code, len(r.content))
PY
	BG_PIDS+=($!)
done
wait "${BG_PIDS[@]: -3}"
read -r peak answered < <(outstanding "$from")
note "python: at most $peak outstanding at the server, $answered answered"
[ "$answered" -eq 12 ] || fail "python: $answered of 12 requests answered: $(cat "$T"/py.*)"
[ "$peak" -le 2 ] || fail "python: $peak requests outstanding at the server, past concurrency = 2"
[ "$peak" -eq 2 ] || fail "python: never 2 at once: the limit held them tighter than it says"

# --- node, a keep-alive agent, eight at once ---
from=$(log_lines)
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 60 node - "$PORT" >"$T/node.out" 2>&1 <<'JS' ||
const http = require("http");
const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
const port = process.argv[2];
let left = 8;
for (let i = 0; i < 8; i++) {
  http.get({ host: "127.0.0.1", port, path: "/slow/200", agent }, (res) => {
    res.resume();
    res.on("end", () => { if (--left === 0) { agent.destroy(); console.log("done"); } });
  }).on("error", (e) => { console.log("error " + e.message); process.exit(1); });
}
JS
	fail "node failed: $(cat "$T/node.out")"
read -r peak answered < <(outstanding "$from")
note "node: at most $peak outstanding at the server, $answered answered"
[ "$answered" -eq 8 ] || fail "node: $answered of 8 requests answered"
[ "$peak" -le 2 ] || fail "node: $peak requests outstanding at the server, past concurrency = 2"

# --- a connection closed before its answer gives its place back ---
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 30 python3 - "$PORT" >"$T/close.out" 2>&1 <<'PY'
import socket, sys, time
port = int(sys.argv[1])
for _ in range(3):  # three unanswered requests, each closed: none keeps a place
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /slow/2000 HTTP/1.1\r\nHost: x\r\n\r\n")
    s.close()
t0 = time.monotonic()
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
print("answered" if s.recv(100).startswith(b"HTTP/1.1 200") else "no answer", "%.1f" % (time.monotonic() - t0))
PY
grep -q "^answered" "$T/close.out" || fail "a request after closed ones did not go: $(cat "$T/close.out")"
read -r _ took <"$T/close.out"
awk -v t="$took" 'BEGIN { exit !(t < 1.5) }' || fail "closed connections kept their places: the next request waited $took s"
"$SLUICE" stat -c "$T/c.ini" | grep -q "concurrency 2, 0 open" || fail "places still held after everything ended: $("$SLUICE" stat -c "$T/c.ini")"
echo ok
