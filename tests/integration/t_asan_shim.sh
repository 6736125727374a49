#!/usr/bin/env bash
# tier: parallel
# Under `make asan` only: the shim built with AddressSanitizer, run inside python3
# with libasan preloaded first (as ASan requires), through the paths the other tests
# take with curl: a shared queue across threads and processes, a refusal, name
# matching through getaddrinfo, fallback = local, and bad sockaddrs.  Elsewhere it
# checks only that it was not asked for.
. "$(dirname "$0")/lib.sh"

if [ -z "${SLUICE_TEST_LIBASAN:-}" ]; then
	note "not a sanitizer build: nothing to do"
	exit 0
fi
ASAN_SHIM="$BUILD_DIR/libsluice-asan.so"
[ -f "$ASAN_SHIM" ] || fail "no $ASAN_SHIM"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:verify_asan_link_order=0

start_server
write_config "$T/a.ini" <<EOF
[byname]
match = localhost:$PORT
rate = 20/s
[refuse]
match = 127.0.0.2
rate = 1/m
max_wait = 0
EOF
"$SLUICE" run -c "$T/a.ini" -- true # check the config with the ASan CLI
start_daemon "$T/a.ini"
WITNESS_DST=127.0.0.1 start_witness syn "$PORT" "$T/arrivals" # not the refused 127.0.0.2
run_py() {
	env LD_PRELOAD="$SLUICE_TEST_LIBASAN:$ASAN_SHIM" SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" "$@"
}
run_py SLUICE_CONFIG="$T/a.ini" python3 "$HELPERS/fetch.py" "http://localhost:$PORT/n" 3 4 || fail "threads under the ASan shim"
run_py SLUICE_CONFIG="$T/a.ini" python3 - "$PORT" <<'EOF' || fail "fork and refusal under the ASan shim"
import os, socket, sys
port = int(sys.argv[1])
pids = []
for k in range(3):
    pid = os.fork()
    if pid == 0:
        socket.create_connection(("localhost", port)).close()
        os._exit(0)
    pids.append(pid)
bad = [p for p in pids if os.waitpid(p, 0)[1] != 0]
try:
    socket.create_connection(("127.0.0.2", port), timeout=2).close()
    socket.create_connection(("127.0.0.2", port), timeout=2).close()
    sys.exit("second connect to 127.0.0.2 was not refused")
except ConnectionRefusedError:
    pass
sys.exit(1 if bad else 0)
EOF
witnessed "$T/arrivals" --interval-ms 50 --family 4 --expect 15 --what "connects under the ASan shim" ||
	fail "spacing under the ASan shim"
# fallback = local and bad input, with no daemon segment.
run_py SLUICE_CONFIG="$T/a.ini" SLUICE_SEGMENT=none python3 "$HELPERS/fetch.py" "http://localhost:$PORT/l" 2 ||
	fail "fallback local under the ASan shim"

# The stream paths under ASan: requests (pipelined, chunked), bytes, a name from a
# Host header, datagrams and a concurrency limit, in private memory (fallback).
write_config "$T/s.ini" <<EOF
[req]
match = 127.0.0.1:$PORT
meter = requests
rate = 50/s
[up]
match = 127.0.0.1:$PORT
meter = bytes
rate = 4M/s
[named]
match = asan.named.test
rate = 50/s
[dgram]
match = 127.0.0.1:9
meter = datagrams
rate = 100/s
[two]
match = 127.0.0.1:$PORT
concurrency = 2
EOF
run_py SLUICE_CONFIG="$T/s.ini" SLUICE_SEGMENT=none python3 - "$PORT" <<'EOF' || fail "stream paths under the ASan shim"
import http.client, socket, sys, threading
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"".join(b"GET /p%d HTTP/1.1\r\nHost: asan.named.test\r\n\r\n" % i for i in range(3)))
data = b""
while data.count(b"hello /p") < 3:
    data += s.recv(65536)
c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
c.request("POST", "/c", body=(b"y" * n for n in (10, 300000)), encode_chunked=True)
assert c.getresponse().read() == b"hello /c\ngot 300010 bytes\n"
s.close()
c.close()  # both gave back their concurrency places
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(3):
    u.sendto(b"d", ("127.0.0.1", 9))
errors = []
def hold():
    try:
        x = socket.create_connection(("127.0.0.1", port)); x.close()
    except OSError as e:
        errors.append(e)
ts = [threading.Thread(target=hold) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
assert not errors, errors
EOF
echo "ok"
