#!/usr/bin/env bash
# tier: parallel
# per = host when the names a program resolves share one address (virtual hosts,
# a CDN): each connection is keyed by the name its own request carries - the
# HTTP Host, a TLS SNI - not by the last name resolved to that address
# (src/shim/connect.c, names_disagree; naming.c).  One python3 process, three
# threads to one name and one to another, each opening a connection a request as
# fast as it is let, both names
# in the test's own /etc/hosts on 127.0.0.1; at 5/s a name.  Judged at the
# destination, per Host: every name's requests spaced by the interval, and each
# name's requests all arrived.  A third name through a connection whose first
# write names nothing (a raw TCP client) is keyed by the address's newest name.
if [ -z "${SLUICE_TEST_NETNS:-}" ]; then
	exec env SLUICE_TEST_NETNS=1 unshare -m bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"

printf '127.0.0.1 localhost\n127.0.0.1 a.test b.test c.test\n' >"$T/hosts"
echo "hosts: files" >"$T/nsswitch.conf"
mount --bind "$T/hosts" /etc/hosts && mount --bind "$T/nsswitch.conf" /etc/nsswitch.conf ||
	fail "cannot bind-mount the test's hosts and nsswitch.conf"

start_server
write_config "$T/v.ini" <<EOF
[vhosts]
match = *.test:$PORT
per = host
rate = 5/s
max_wait = 1m
EOF
WITNESS_KEY=host start_witness request "$PORT" "$T/keyed"

# Uneven demand, a new connection a request: three threads to a.test, one to
# b.test.  Keyed by the last name resolved, a.test's connections took b.test's
# slots too.
SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" "$SLUICE" run -c "$T/v.ini" -- python3 -c '
import sys, threading, urllib.request
port = sys.argv[1]
bad = []
def run(host, first, n):
    for i in range(first, first + n):
        body = urllib.request.urlopen("http://%s:%s/%s%d" % (host, port, host, i), timeout=30).read()
        if body != ("hello /%s%d\n" % (host, i)).encode():
            bad.append(body)
ts = [threading.Thread(target=run, args=("a.test", 4 * k, 4)) for k in range(3)]
ts.append(threading.Thread(target=run, args=("b.test", 0, 6)))
for t in ts: t.start()
for t in ts: t.join()
sys.exit(1 if bad else 0)
' "$PORT" >"$T/py.out" 2>&1 || fail "python3: $(cat "$T/py.out")"
grep -q 'shares its address with other names' "$T/shim.log" ||
	fail "the shared address was not seen: $(tail -n 20 "$T/shim.log")"
[ "$(grep -c " /a.test[0-9]*\$" "$SERVER_LOG")" -eq 12 ] || fail "not every request to a.test arrived"
[ "$(grep -c " /b.test[0-5]\$" "$SERVER_LOG")" -eq 6 ] || fail "not every request to b.test arrived"
witnessed "$T/keyed" --interval-ms 200 --group-field 4 --groups 2 --expect 18 \
	--what "a.test and b.test on one address, per = host" || fail "per = host on a shared address: spacing"
: >"$T/keyed"

# A first write that names nothing: keyed by the address's newest name, never let
# go unheld.  Three raw connections to c.test, each writing a line.
"$SLUICE" run -c "$T/v.ini" -- python3 -c '
import socket, sys
port = int(sys.argv[1])
socket.getaddrinfo("a.test", port)
for i in range(3):
    addr = socket.getaddrinfo("c.test", port, type=socket.SOCK_STREAM)[0][4]
    s = socket.create_connection(addr, timeout=30)
    s.sendall(b"GET /raw%d HTTP/1.0\r\n\r\n" % i)
    s.recv(4096)
    s.close()
' "$PORT" >"$T/raw.out" 2>&1 || fail "raw client: $(cat "$T/raw.out")"
[ "$(grep -c ' /raw[0-2]$' "$SERVER_LOG")" -eq 3 ] || fail "not every raw request arrived"
witnessed "$T/keyed" --interval-ms 200 --expect 3 --what "requests naming no host, keyed by c.test" ||
	fail "first writes that name nothing: spacing"
echo "ok"
