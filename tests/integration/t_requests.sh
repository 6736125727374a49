#!/usr/bin/env bash
# tier: parallel
# meter = requests: each request on a connection is held, not just the connect; the
# first one takes its place with the connect (so no first write is ever held).
#  - python3 http.client: 6 keep-alive requests on one connection;
#  - curl with several URLs on one connection;
#  - a pipelined burst: 4 requests in one sendall, cut at each boundary;
#  - a chunked upload followed by a GET on the same connection;
#  - TLS: each turn (a write after a read that returned data) is held;
#  - a connections section on the same destination holds only the connect.
# Releases are checked strictly for spacing; every response must be intact.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/r.ini" <<EOF
[per-request]
match = 127.0.0.1:$PORT
meter = requests
rate = 10/s
max_wait = 1m
EOF
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"
requests_spaced() { # NAME COUNT [CONNECTIONS]: COUNT request releases, spaced; the first
	# request of each of the CONNECTIONS (default 1) took its place with the connect
	local conns=${3:-1}
	expect_spaced "$T/arrivals" 100 "$2" "$1 requests"
	[ "$(grep -c ' request .* go ' "$T/shim.log")" -eq $(($2 - conns)) ] || fail "$1: not held as requests"
	[ "$(grep -c ' connect .* go ' "$T/shim.log")" -eq "$conns" ] || fail "$1: first request not taken at the connect"
	: >"$T/shim.log"
}
start_witness request "$PORT" "$T/arrivals"
run() { "$SLUICE" run -c "$T/r.ini" -- "$@"; }

run python3 -c '
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
for i in range(6):
    c.request("GET", "/k%d" % i)
    r = c.getresponse()
    body = r.read()
    assert body == b"hello /k%d\n" % i, body
    assert not r.will_close, "the server closed the connection"
c.close()
' "$PORT" || fail "http.client keep-alive"
requests_spaced "http.client keep-alive" 6

urls=()
for i in 1 2 3 4; do urls+=("http://127.0.0.1:$PORT/u$i"); done
run curl -sS -v "${urls[@]}" >"$T/curl.out" 2>"$T/curl.err" || fail "curl: $(cat "$T/curl.err")"
[ "$(grep -c '^hello /u' "$T/curl.out")" -eq 4 ] || fail "curl bodies: $(cat "$T/curl.out")"
[ "$(grep -ci 're-using existing connection' "$T/curl.err")" -eq 3 ] || fail "curl did not keep one connection"
requests_spaced "curl, one connection" 4

run python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"".join(b"GET /p%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(4)))
data = b""
while data.count(b"hello /p") < 4:
    chunk = s.recv(65536)
    assert chunk, "closed early: %r" % data
    data += chunk
for i in range(4):
    assert b"hello /p%d\n" % i in data, data
' "$PORT" || fail "pipelined requests"
requests_spaced "pipelined" 4

run python3 -c '
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
chunks = (b"x" * n for n in (100, 5000, 1, 70000))
c.request("POST", "/upload", body=chunks, encode_chunked=True)
body = c.getresponse().read()
assert body == b"hello /upload\ngot 75101 bytes\n", body
c.request("GET", "/after")
body = c.getresponse().read()
assert body == b"hello /after\n", body
' "$PORT" || fail "chunked upload"
requests_spaced "chunked upload + GET" 2

# TLS through libssl, not HTTP/1 inside: turns, found in the plaintext - the
# handshake takes none, the first ping the connect's place, 4 pings 4 more.
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 1 \
	-keyout "$T/key.pem" -out "$T/cert.pem" >/dev/null 2>&1 || fail "cannot make a certificate"
start_helper tport "$T/tls.port" "TLS server" \
	python3 "$HELPERS/tls_turns.py" serve "$T/cert.pem" "$T/key.pem" "$T/tls.port" 200
write_config "$T/tls.ini" <<EOF
[turns]
match = 127.0.0.1:$tport
meter = requests
rate = 10/s
max_wait = 1m
EOF
start_witness request "$tport" "$T/turns"
"$SLUICE" run -c "$T/tls.ini" -- python3 "$HELPERS/tls_turns.py" talk "$tport" 5 || fail "TLS turns"
turns=$(grep -c ' \(request\|connect\) .* go ' "$T/shim.log")
# At the destination the handshake's turns are not the client's: the server's
# session ticket, sent unasked, splits the client's Finished and its first ping
# into two there.  So the pings after the first are what is compared.
witnessed "$T/turns" --interval-ms 100 --skip 3 --at-least 3 --what "TLS pings after the first" || fail "TLS turns: spacing"
grep -q 'TLS, not HTTP/1 inside: counting turns' "$T/shim.log" || fail "TLS was not counted in turns"
[ "$turns" -eq 5 ] || fail "TLS: $turns places for 5 pings (a connect and 4 turns expected)"
note "TLS: $turns places (the connect, 4 turns) for 5 pings"
: >"$T/shim.log"

# Connections and requests sections together: the connect is held once by the
# first, every request by the second.
write_config "$T/both.ini" <<EOF
[per-connection]
match = 127.0.0.1:$PORT
rate = 2/s
max_wait = 1m

[per-request]
match = 127.0.0.1:$PORT
meter = requests
rate = 10/s
max_wait = 1m
EOF
: >"$T/arrivals"
"$SLUICE" run -c "$T/both.ini" -- python3 -c '
import http.client, sys
for k in range(2):
    c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
    for i in range(3):
        c.request("GET", "/b%d%d" % (k, i))
        assert c.getresponse().read() == b"hello /b%d%d\n" % (k, i)
    c.close()
' "$PORT" || fail "connections + requests"
witnessed "$T/arrivals" --interval-ms 100 --expect 6 --what "requests on two connections" || fail "both: spacing"
# Each connection's first request also took the connection's place (one ticket).
[ "$(grep -c 'sections=per-connection,per-request: go' "$T/shim.log")" -eq 2 ] ||
	fail "both: the connects were not held by per-connection: $(grep ' go ' "$T/shim.log")"
echo "ok"
