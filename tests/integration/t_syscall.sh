#!/usr/bin/env bash
# tier: parallel
# Calls made through libc's syscall() are shaped as the named calls are
# (src/shim/syscall.c): bind9's dig and nslookup, which send their queries with
# sendmmsg through libuv's syscall(), against a local DNS responder at 5/s; a C
# program that connects, writes and sends datagrams only with syscall(SYS_...).
# Asserted at the destination (kernel times): spacing, every arrival, and that
# numbers the shim does not route still reach the kernel whole.
. "$(dirname "$0")/lib.sh"

start_server
start_helper uport "$T/udp.port" "UDP sink" \
	python3 "$HELPERS/udp_sink.py" --port-file "$T/udp.port" --log "$T/udp.log"
start_helper dport "$T/dns.port" "DNS responder" \
	python3 "$HELPERS/dns_server.py" --port-file "$T/dns.port" --log "$T/dns.log"
write_config "$T/s.ini" <<EOF
[dns]
match = 127.0.0.1:$dport
meter = datagrams
rate = 5/s
max_wait = 1m

[udp]
match = 127.0.0.1:$uport
meter = datagrams
rate = 10/s
max_wait = 1m

[tcp]
match = 127.0.0.1:$PORT
rate = 10/s
max_wait = 1m
EOF
cc -O1 -Wall -o "$T/raw_syscalls" "$HELPERS/raw_syscalls.c" || fail "cannot build raw_syscalls"
start_witness datagram "$dport" "$T/dns.arrivals"
start_witness datagram "$uport" "$T/udp.arrivals"
start_witness syn "$PORT" "$T/syn.arrivals"
run() { "$SLUICE" run -c "$T/s.ini" -- "$@"; }

# dig: ten names, one query each, sent with sendmmsg through syscall().
names=$(for i in $(seq 10); do echo "q$i.test"; done)
# shellcheck disable=SC2086
run dig @127.0.0.1 -p "$dport" +short +tries=1 +timeout=30 $names >"$T/dig.out" ||
	fail "dig: $(cat "$T/dig.out")"
[ "$(grep -c '^127\.0\.0\.1$' "$T/dig.out")" -eq 10 ] || fail "dig: $(cat "$T/dig.out")"
expect_spaced "$T/dns.arrivals" 200 10 "dig queries"

# nslookup: an A and an AAAA query for each of three names, three processes in
# one run (one daemon: one queue).
run sh -c 'for i in 1 2 3; do nslookup -port="$1" "n$i.test" 127.0.0.1 || exit 1; done' sh "$dport" \
	>"$T/ns.out" || fail "nslookup: $(cat "$T/ns.out")"
[ "$(grep -c "Name:	n[123].test" "$T/ns.out")" -eq 3 ] || fail "nslookup: $(cat "$T/ns.out")"
expect_spaced "$T/dns.arrivals" 200 6 "nslookup queries"

# A C program: syscall(SYS_connect) of stream sockets, writes through SYS_write.
run "$T/raw_syscalls" connect "$PORT" 5 || fail "raw connects"
expect_spaced "$T/syn.arrivals" 100 5 "syscall(SYS_connect)"
[ "$(grep -c " /raw$" "$SERVER_LOG")" -eq 5 ] || fail "the requests written with SYS_write did not all arrive"

# syscall(SYS_connect) of a datagram socket, then syscall(SYS_sendmmsg): one call
# of two messages (two places) and four of one.
run "$T/raw_syscalls" sendmmsg "$uport" 6 || fail "raw sendmmsg"
expect_spaced "$T/udp.arrivals" 100 6 "syscall(SYS_sendmmsg)"
for _ in $(seq 50); do [ "$(wc -l <"$T/udp.log")" -ge 6 ] && break; sleep 0.1; done
[ "$(wc -l <"$T/udp.log")" -eq 6 ] || fail "$(wc -l <"$T/udp.log") of 6 datagrams arrived"

# Every other number goes to the kernel with its six arguments, and errors come
# back as libc's syscall() returns them.
run "$T/raw_syscalls" others || fail "unrouted system calls"
echo "ok"
