#!/usr/bin/env bash
# tier: parallel
# glibc's own resolver against a name server a datagram section holds (docs/programs.md,
# "glibc's resolver"; src/supervisor/relay.c).  Its queries are sent from inside
# libc - a connect and then send or sendmmsg on the connected socket - where the
# shim does not reach; under `sluice run --seccomp` the trapped connect puts the
# socket through the supervisor's relay, which holds each datagram.  getent (one
# process a lookup) and python3's getaddrinfo (A and AAAA in one sendmmsg), at
# 5/s, judged at the destination: the datagrams' arrival times at the name
# server, and every lookup answered.  Without --seccomp, `sluice run` says which
# section it cannot hold and how to.  In a network and mount namespace of its
# own: a responder on its own 127.0.0.1:53, named in its own resolv.conf.
if [ -z "${SLUICE_TEST_NETNS:-}" ]; then
	exec env SLUICE_TEST_NETNS=1 unshare -mn bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"

ip link set lo up || fail "cannot bring up lo in the test's network namespace"
echo "nameserver 127.0.0.1" >"$T/resolv.conf"
echo "127.0.0.1 localhost" >"$T/hosts"
echo "hosts: files dns" >"$T/nsswitch.conf"
mount --bind "$T/resolv.conf" /etc/resolv.conf && mount --bind "$T/hosts" /etc/hosts &&
	mount --bind "$T/nsswitch.conf" /etc/nsswitch.conf ||
	fail "cannot bind-mount the test's resolv.conf, hosts and nsswitch.conf"

start_helper dport "$T/dns.port" "DNS responder" python3 "$HELPERS/dns_server.py" --port 53 \
	--port-file "$T/dns.port" --log "$T/dns.log"
start_witness datagram 53 "$T/dns.arrivals"
write_config "$T/r.ini" <<EOF
[name-server]
match = 127.0.0.1:53
meter = datagrams
rate = 5/s
max_wait = 1m
EOF

# queries_spaced AT_LEAST WHAT: at least AT_LEAST queries reached the name server
# since the last look, every one spaced by the interval.  Counted once the
# witness has written what it saw (the count no longer grows over 0.3 s): on a
# loaded machine it wrote getent's last query after the client had exited, and
# a count taken at once was one short of what the spacing check then read.
queries_spaced() {
	local n m
	n=$(wc -l <"$T/dns.arrivals")
	for _ in $(seq 20); do
		sleep 0.3
		m=$(wc -l <"$T/dns.arrivals")
		[ "$m" = "$n" ] && break
		n=$m
	done
	[ "$n" -ge "$1" ] || fail "$2: $n queries reached the name server"
	expect_spaced "$T/dns.arrivals" 200 "$n" "$2"
}

# getent: four lookups, a process each.
"$SLUICE" run --seccomp -c "$T/r.ini" -- sh -c \
	'for i in 1 2 3 4; do getent hosts "g$i.test" || exit 1; done' >"$T/getent.out" 2>&1 ||
	fail "getent: $(cat "$T/getent.out")"
[ "$(grep -c '^127\.0\.0\.1 *g[1-4]\.test$' "$T/getent.out")" -eq 4 ] || fail "getent: not every lookup answered: $(cat "$T/getent.out")"
queries_spaced 4 "getent's queries (glibc's resolver)"

# python3: three getaddrinfo() in one process, A and AAAA sent together.
"$SLUICE" run --seccomp -c "$T/r.ini" -- python3 -c '
import socket
for i in range(3):
    print(sorted({a[4][0] for a in socket.getaddrinfo("p%d.test" % i, 80, type=socket.SOCK_STREAM)}))
' >"$T/py.out" 2>&1 || fail "python3 getaddrinfo: $(cat "$T/py.out")"
[ "$(grep -c "^\['127.0.0.1'\]$" "$T/py.out")" -eq 3 ] || fail "python3 getaddrinfo: $(cat "$T/py.out")"
[ "$(grep -c ' udp p[0-2]\.test ' "$T/dns.log")" -ge 6 ] || fail "python3: not A and AAAA each: $(cat "$T/dns.log")"
queries_spaced 6 "getaddrinfo's queries, A and AAAA"

# A static program's own resolver (busybox nslookup: a connected socket, then
# send), held the same way: sluice run puts a static program under seccomp itself.
"$SLUICE" run -c "$T/r.ini" -- /bin/busybox sh -c \
	'for i in 1 2 3; do /bin/busybox nslookup -type=a "b$i.test" 127.0.0.1 || exit 1; done' >"$T/bb.out" 2>&1 ||
	fail "busybox nslookup: $(cat "$T/bb.out")"
[ "$(grep -c 'Address: 127\.0\.0\.1$' "$T/bb.out")" -eq 3 ] || fail "busybox nslookup: $(cat "$T/bb.out")"
queries_spaced 3 "busybox nslookup's queries"

# A static sender that fires and forgets: five datagrams on a connected socket,
# then exit.  Its sends return at once (the relay holds them), so sluice run stays
# until the relay has sent the last at its slot.
cc -O1 -static -o "$T/udp_burst" "$HELPERS/udp_burst.c" || fail "cannot build udp_burst (static)"
start_helper uport "$T/udp.port" "UDP sink" python3 "$HELPERS/udp_sink.py" --port-file "$T/udp.port" \
	--log "$T/udp.log"
cat >>"$T/r.ini" <<EOF

[sink]
match = 127.0.0.1:$uport
meter = datagrams
rate = 5/s
max_wait = 1m
EOF
start_witness datagram "$uport" "$T/udp.arrivals"
"$SLUICE" run -c "$T/r.ini" -- "$T/udp_burst" "$uport" 5 >"$T/burst.out" 2>&1 ||
	fail "udp_burst: $(cat "$T/burst.out")"
expect_spaced "$T/udp.arrivals" 200 5 "a static program's datagrams on a connected socket, sent after it exited"

# Without --seccomp the shim cannot hold them, and `sluice run` says so.
"$SLUICE" run -c "$T/r.ini" -- getent hosts w.test >"$T/plain.out" 2>&1 || fail "getent: $(cat "$T/plain.out")"
grep -q 'name-server.*glibc.*--seccomp' "$T/plain.out" ||
	fail "no word that glibc's resolver is not held without --seccomp: $(cat "$T/plain.out")"
echo "ok"
