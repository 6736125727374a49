#!/usr/bin/env bash
# tier: parallel
# sluice run --seccomp learns the names a static program looks up over DNS
# (src/supervisor/dns.c): the program's socket connected to a name server's port
# 53 goes through the supervisor's proxy, which reads each answer, so `*.test`
# and `per = host` match its later connects by the name it asked for.  A static
# Go program (its own resolver, UDP; and TCP when the answer comes truncated) and
# static busybox wget (glibc's resolver).  The test runs in a network and mount
# namespace of its own: a DNS responder on its own 127.0.0.1:53, named in its own
# /etc/resolv.conf, an /etc/hosts without the names.  Judged at the destination:
# SYNs spaced by the rate, per name where keyed.
if [ -z "${SLUICE_TEST_NETNS:-}" ]; then
	exec env SLUICE_TEST_NETNS=1 unshare -mn bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"

GO="$BUILD_DIR/tests/goclient"
BUSYBOX=/bin/busybox
[ -x "$GO" ] || fail "$GO is missing (make test builds it; scripts/deps.sh installs golang-go)"
[ -x "$BUSYBOX" ] || fail "$BUSYBOX is missing (scripts/deps.sh installs busybox-static)"
ip link set lo up || fail "cannot bring up lo in the test's network namespace"
echo "nameserver 127.0.0.1" >"$T/resolv.conf"
echo "127.0.0.1 localhost" >"$T/hosts"
mount --bind "$T/resolv.conf" /etc/resolv.conf && mount --bind "$T/hosts" /etc/hosts ||
	fail "cannot bind-mount the test's resolv.conf and hosts"

start_dns_at() { # PORTFILE ARGS...
	local pf=$1
	shift
	start_helper dport "$pf" "DNS responder" python3 "$HELPERS/dns_server.py" --port 53 --port-file "$pf" \
		--log "$T/dns.log" --name api.test=127.0.0.1 --name b.test=127.0.0.2 "$@"
	DNS_PID=${BG_PIDS[-1]}
}
start_dns_at "$T/dns1.port"
start_server --also 127.0.0.2
start_witness syn "$PORT" "$T/syn"
# The name server's own datagrams matched too: a lookup's socket connected to a
# peer a datagram section holds still goes through the proxy.
write_config "$T/p.ini" <<EOF
[tests]
match = *.test:$PORT
rate = 5/s
max_wait = 1m

[name-server]
match = 127.0.0.1:53
meter = datagrams
rate = 1000/s
EOF
named() { # FILE COUNT NAME: COUNT connects said matched as NAME in FILE
	[ "$(grep -c "seccomp connect 127.0.0.[12]:$PORT ($3): go" "$1")" -eq "$2" ] ||
		fail "$3 did not match every connect: $(cat "$1")"
	grep -q "seccomp dns: $3 is " "$1" || fail "$3 was not learned from the program's lookup: $(cat "$1")"
}

# Go over UDP.
out=$("$SLUICE" run -v -c "$T/p.ini" -- "$GO" "http://api.test:$PORT/go" 6 2 2>"$T/go.err") ||
	fail "Go to api.test: $out $(cat "$T/go.err")"
[ "$out" = "done 6 0" ] || fail "Go to api.test: $out"
named "$T/go.err" 6 api.test
grep -q "udp api.test" "$T/dns.log" || fail "the lookup did not reach the responder: $(cat "$T/dns.log")"
expect_spaced "$T/syn" 200 6 "Go (UDP lookups) to api.test matched by *.test"

# static busybox wget: glibc's resolver.
"$SLUICE" run -v -c "$T/p.ini" -- "$BUSYBOX" sh -c \
	"for i in 1 2 3; do $BUSYBOX wget -q -O /dev/null http://api.test:$PORT/bb\$i || exit 1; done" \
	2>"$T/bb.err" || fail "busybox wget: $(cat "$T/bb.err")"
named "$T/bb.err" 3 api.test
expect_spaced "$T/syn" 200 3 "busybox wget to api.test"

# Go over TCP: every UDP answer comes truncated.
kill "$DNS_PID"
: >"$T/dns.log"
start_dns_at "$T/dns2.port" --truncate-udp
out=$("$SLUICE" run -v -c "$T/p.ini" -- "$GO" "http://api.test:$PORT/tcp" 4 2 2>"$T/tcp.err") ||
	fail "Go, TCP lookups: $out $(cat "$T/tcp.err")"
[ "$out" = "done 4 0" ] || fail "Go, TCP lookups: $out"
named "$T/tcp.err" 4 api.test
grep -q "tcp api.test" "$T/dns.log" || fail "no lookup over TCP: $(cat "$T/dns.log")"
expect_spaced "$T/syn" 200 4 "Go (TCP lookups) to api.test"

# per = host: api.test (127.0.0.1) and b.test (127.0.0.2), each its own queue.
kill "$DNS_PID"
start_dns_at "$T/dns3.port"
write_config "$T/k.ini" <<EOF
[per-name]
match = *.test:$PORT
per = host
rate = 5/s
max_wait = 1m
EOF
kill "$WITNESS_PID"
WITNESS_KEY=dst start_witness syn "$PORT" "$T/keyed"
"$SLUICE" run --seccomp -v -c "$T/k.ini" -- sh -c '
	"$1" "http://api.test:$2/a" 5 1 >"$3.a" & a=$!
	"$1" "http://b.test:$2/b" 5 1 >"$3.b"
	wait $a' sh "$GO" "$PORT" "$T/k.out" 2>"$T/k.err" || fail "per = host: $(cat "$T/k.err")"
[ "$(cat "$T/k.out.a") $(cat "$T/k.out.b")" = "done 5 0 done 5 0" ] || fail "per = host: $(cat "$T/k.out."*)"
named "$T/k.err" 5 b.test
witnessed "$T/keyed" --interval-ms 200 --group-field 4 --groups 2 --expect 10 --what "api.test and b.test, per = host" ||
	fail "per = host: spacing"
echo "ok"
