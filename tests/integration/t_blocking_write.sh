#!/usr/bin/env bash
# tier: parallel
# A held first write on a blocking socket (a connection named by its Host header,
# so already open when its first write names it): a signal handler with SA_RESTART lets the wait go on to the slot; one without
# makes the write fail with EINTR and return the place (python3 retries by itself,
# PEP 475, so the program sees only the delay; the returned places show in stat);
# SO_SNDTIMEO ends the wait with EAGAIN and keeps the place for the retry.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/b.ini" <<EOF
[slow]
match = held.test
rate = 1/s
max_wait = 1m
EOF
start_witness first "$PORT" "$T/arrivals"
SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" "$SLUICE" run -c "$T/b.ini" -- python3 - "$PORT" "$SLUICE" <<'EOF' || fail "blocking held writes"
import json, os, select, signal, socket, struct, subprocess, sys, time
port, sluice = int(sys.argv[1]), sys.argv[2]

def held_socket():
    return socket.create_connection(("127.0.0.1", port))

def request(s, tag):
    s.sendall(b"GET /%s HTTP/1.0\r\nHost: held.test\r\n\r\n" % tag.encode())
    assert b"200 OK" in s.recv(4096)
    s.close()

def stat():
    out = subprocess.run([sluice, "stat", "--segment", os.environ["SLUICE_SEGMENT"], "--json"],
                         capture_output=True, text=True, check=True).stdout
    return [x for x in json.loads(out)["sections"] if x["name"] == "slow"][0]

r, w = os.pipe()
os.set_blocking(r, False); os.set_blocking(w, False)
signal.set_wakeup_fd(w)
signal.signal(signal.SIGALRM, lambda *a: None)
request(held_socket(), "first")                      # takes the slot at t0

# SA_RESTART: the wait goes on through 20 signals a second.
signal.siginterrupt(signal.SIGALRM, False)
s = held_socket()
signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
t0 = time.monotonic(); request(s, "restart"); waited = time.monotonic() - t0
signal.setitimer(signal.ITIMER_REAL, 0, 0)
hits = len(os.read(r, 4096))
print("  SA_RESTART: waited %.2f s through %d signals" % (waited, hits))
assert hits >= 5 and waited >= 0.8, (hits, waited)
given_up = stat()["given_up"]

# No SA_RESTART (Python's default): EINTR, place returned, Python retries.
signal.siginterrupt(signal.SIGALRM, True)
s = held_socket()
signal.setitimer(signal.ITIMER_REAL, 0.2, 0.2)
t0 = time.monotonic(); request(s, "eintr"); waited = time.monotonic() - t0
signal.setitimer(signal.ITIMER_REAL, 0, 0)
returned = stat()["given_up"] - given_up
print("  no SA_RESTART: waited %.2f s, %d places returned on EINTR" % (waited, returned))
assert returned >= 2 and waited >= 0.5, (returned, waited)

# SO_SNDTIMEO: EAGAIN after 200 ms, the place kept; the retry goes at the slot.
s = held_socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 200000))
t0 = time.monotonic()
try:
    s.send(b"GET /timeout HTTP/1.0\r\nHost: held.test\r\n\r\n")
    sys.exit("held send did not time out")
except (BlockingIOError, socket.timeout):
    pass
timed_out = time.monotonic() - t0
print("  SO_SNDTIMEO 200 ms: EAGAIN after %.0f ms" % (timed_out * 1000))
assert 0.15 <= timed_out < 0.9, timed_out
before = stat()["given_up"]
for attempt in range(20):      # as a program with SO_SNDTIMEO would: try again
    try:
        s.sendall(b"GET /timeout HTTP/1.0\r\nHost: held.test\r\n\r\n")
        break
    except (BlockingIOError, socket.timeout):
        pass
assert b"200 OK" in s.recv(4096)
s.close()
print("  SO_SNDTIMEO: went after %d more time-outs" % attempt)
assert stat()["given_up"] == before, "a timed-out write gave its place back"
EOF
witnessed "$T/arrivals" --interval-ms 1000 --expect 4 --what "held first writes" || fail "spacing"
