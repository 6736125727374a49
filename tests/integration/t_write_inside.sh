#!/usr/bin/env bash
# tier: parallel
# A held request is made inside its release (docs/design.md, "Where the bound is
# kept"): a writer held up between its request's release and its send must not
# bring the next request closer to it at the destination.  An interposer between
# the shim and libc (helpers/slow_send.c) sleeps 8 ms before every other write
# that begins a request - a preemption there, made to happen every time.  Counted
# from its check, the late request was followed by the next one 12 ms after it at
# an interval of 20 ms; made inside the release, the next check waits for it.
#  - python3 http.client (blocking send), keep-alive, 12 requests;
#  - node's keep-alive agent (non-blocking writev/write through libuv), 12;
#  - python3 connections named by their first write (Host), 4 threads, 24;
#  - python3 sendmsg of a request and body in two pieces, 6, at 10/s;
#  - node http2: 16 streams at once on one h2c connection (HTTP/2's box).
# Each: spaced at the destination's kernel, every answer whole.
. "$(dirname "$0")/lib.sh"

start_server
PORT3=$PORT # named by its requests' Host only
start_server
PORT2=$PORT
start_server
write_config "$T/w.ini" <<EOF
[requests]
match = 127.0.0.1:$PORT
meter = requests
rate = 50/s
max_wait = 1m

[named]
match = w.named.test
rate = 50/s
max_wait = 1m

[slow]
match = 127.0.0.1:$PORT2
meter = requests
rate = 10/s
max_wait = 1m
EOF
cc -O1 -shared -fPIC -o "$T/slow_send.so" "$HELPERS/slow_send.c" -ldl ||
	fail "cannot build the slow send interposer"
# The interposer goes in behind the shim in the program only (not in sluice run).
run() { "$SLUICE" run -c "$T/w.ini" -- env LD_PRELOAD="$PRELOAD:$T/slow_send.so" "$@" 2>"$T/run.err"; }
# held_at_least N WHAT: the run held N requests or more (else they did not wait, and
# their spacing proves nothing of the release).
held_at_least() {
	local n
	n=$(sed -n 's/.*held \([0-9]*\) call.*/\1/p' "$T/run.err" | head -1)
	[ "${n:-0}" -ge "$1" ] || fail "$2: only ${n:-0} requests held: $(cat "$T/run.err")"
}

start_witness request "$PORT" "$T/arrivals"
run python3 -c '
import http.client, sys, threading
def client(t):
    c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
    for i in range(6):
        c.request("GET", "/t%di%d" % (t, i))
        body = c.getresponse().read()
        assert body == b"hello /t%di%d\n" % (t, i), body
ts = [threading.Thread(target=client, args=(t,)) for t in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
' "$PORT" || fail "python3 http.client: $(cat "$T/run.err")"
held_at_least 12 "http.client"
expect_spaced "$T/arrivals" 20 24 "http.client, 4 threads, held up after each other release"

run node -e '
const http = require("http");
const agent = new http.Agent({keepAlive: true, maxSockets: 4});
let done = 0;
for (let i = 0; i < 24; i++)
  http.get({host: "127.0.0.1", port: +process.argv[1], path: "/n" + i, agent}, (res) => {
    let body = "";
    res.on("data", (c) => body += c);
    res.on("end", () => {
      if (body !== "hello /n" + i + "\n") { console.error("bad body", body); process.exit(1); }
      if (++done === 24) agent.destroy();
    });
  }).on("error", (e) => { console.error(e.message); process.exit(1); });
' "$PORT" || fail "node keep-alive agent: $(cat "$T/run.err")"
held_at_least 12 "node agent"
expect_spaced "$T/arrivals" 20 24 "node agent, 4 sockets, held up after each other release"

# A connection named by its first write (a Host header; no section matches its
# address): that write takes the connection's place, inside its release too.
start_witness first "$PORT3" "$T/firsts"
run python3 -c '
import http.client, sys, threading
def client(t):
    for i in range(6):
        c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
        c.request("GET", "/f%di%d" % (t, i), headers={"Host": "w.named.test"})
        body = c.getresponse().read()
        assert body == b"hello /f%di%d\n" % (t, i), body
        c.close()
ts = [threading.Thread(target=client, args=(t,)) for t in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
' "$PORT3" || fail "python3, named by Host: $(cat "$T/run.err")"
held_at_least 12 "named by Host"
expect_spaced "$T/firsts" 20 24 "connections named by their first write, held up after each other release"
kill "$WITNESS_PID"

# At 10/s a release counts from where its call ended: the late one too.
start_witness request "$PORT2" "$T/arrivals2"
SLOW_SEND_MS=30 run python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
for i in range(6):
    body = b"x" * 100
    head = b"POST /m%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (i, len(body))
    assert s.sendmsg([head, body]) == len(head) + len(body)
    data = b""
    while b"hello /m%d\n" % i not in data:
        chunk = s.recv(65536)
        assert chunk, "closed"
        data += chunk
' "$PORT2" || fail "python3 sendmsg: $(cat "$T/run.err")"
held_at_least 4 "sendmsg"
expect_spaced "$T/arrivals2" 100 6 "sendmsg at 10/s, held up after each other release"

# HTTP/2: node's streams on one h2c connection, non-blocking, so frames wait in
# the connection's box and leave it at each opening HEADERS' release - sent
# inside that release, the interposer's sleep before every other HEADERS with it.
start_helper H2C "$T/port.h2c" "h2c server" \
	/usr/bin/python3 "$HELPERS/h2_server.py" --port-file "$T/port.h2c" --log "$T/h2c.log" --lifetime 120
cat >>"$T/w.ini" <<EOF

[h2c]
match = 127.0.0.1:$H2C
meter = requests
rate = 50/s
max_wait = 1m
EOF
run node -e '
const http2 = require("http2");
const s = http2.connect("http://127.0.0.1:" + process.argv[1]);
let done = 0;
s.on("error", (e) => { console.error(e.message); process.exit(1); });
for (let i = 0; i < 16; i++) {
  const r = s.request({":path": "/h" + i});
  let body = "";
  r.setEncoding("utf8");
  r.on("data", (d) => { body += d; });
  r.on("end", () => {
    if (body !== "hello /h" + i + "\n") { console.error("bad body", i, body); process.exit(1); }
    if (++done === 16) s.close();
  });
}
' "$H2C" || fail "node h2c: $(cat "$T/run.err")"
held_at_least 12 "node h2c"
sleep 0.3
python3 "$HELPERS/arrivals.py" "$T/h2c.log" --interval-ms 20 --expect 16 \
	--what "h2c streams, held up after each other release" || fail "h2c streams: spacing at the server"
echo "ok"
