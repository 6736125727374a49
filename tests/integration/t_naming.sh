#!/usr/bin/env bash
# tier: parallel
# Names beyond DNS: connections to 127.0.0.1 that no section matches by address
# are named by their first write, and sections matching that name hold them there.
#  - HTTP Host header: curl -H Host, curl --resolve (no getaddrinfo), python3
#    http.client on a blocking socket;
#  - TLS SNI: openssl s_client -servername (blocking), curl -k over --resolve;
#  - a forward proxy: curl -p (CONNECT name:port) and curl -x (absolute-form);
#  - names no section wants pass unheld;
#  - a name also brings sections metering requests (each keep-alive request held).
# Spacing is checked where the writes arrive (kernel times of each connection's first
# segment, or each request's); every response must arrive intact.
. "$(dirname "$0")/lib.sh"

start_server
start_helper proxy "$T/proxy.port" proxy \
	python3 "$HELPERS/proxy.py" --port-file "$T/proxy.port" --upstream "$PORT"
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=api.sni.test -days 1 \
	-keyout "$T/key.pem" -out "$T/cert.pem" >/dev/null 2>&1 || fail "cannot make a certificate"
tls_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
openssl s_server -quiet -accept "127.0.0.1:$tls_port" -cert "$T/cert.pem" -key "$T/key.pem" -www \
	>/dev/null 2>&1 &
BG_PIDS+=($!)
for _ in $(seq 100); do
	(exec 3<>"/dev/tcp/127.0.0.1/$tls_port") 2>/dev/null && break
	sleep 0.1
done

write_config "$T/n.ini" <<EOF
[byhost]
match = hooks.named.test
rate = 10/s
max_wait = 1m

[bysni]
match = api.sni.test:$tls_port
rate = 10/s
max_wait = 1m

[byproxy]
match = tunnel.test:$PORT, plain.test:$PORT
rate = 10/s
max_wait = 1m
EOF
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"
first_writes_spaced() { # NAME COUNT [FILE]: COUNT first writes spaced where they went (FILE, by
	# default the server's), each named by its first write
	expect_spaced "${3:-$T/first}" 100 "$2" "$1 first writes"
	[ "$(grep -c 'first write names .*held as a new connection' "$T/shim.log")" -eq "$2" ] ||
		fail "$1: not named by its first write: $(grep 'first write' "$T/shim.log" | head -3)"
	: >"$T/shim.log"
}
start_witness first "$PORT" "$T/first"
start_witness first "$tls_port" "$T/first-tls"
start_witness first "$proxy" "$T/first-proxy"
run() { "$SLUICE" run -c "$T/n.ini" -- "$@"; }

# HTTP Host.  curl's own resolver never sees hooks.named.test.
run sh -c 'for i in 1 2 3 4; do
	[ "$(curl -sS -H "Host: hooks.named.test" "http://127.0.0.1:$1/h$i")" = "hello /h$i" ] || exit 1
done' _ "$PORT" || fail "curl -H Host"
first_writes_spaced "curl -H Host" 4
run sh -c 'for i in 1 2 3; do
	[ "$(curl -sS --resolve "hooks.named.test:$1:127.0.0.1" "http://hooks.named.test:$1/r$i")" = "hello /r$i" ] || exit 1
done' _ "$PORT" || fail "curl --resolve"
first_writes_spaced "curl --resolve" 3
run python3 -c '
import http.client, sys
for i in range(3):
    c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
    c.request("GET", "/p%d" % i, headers={"Host": "Hooks.Named.Test"})
    body = c.getresponse().read()
    assert body == b"hello /p%d\n" % i, body
    c.close()
' "$PORT" || fail "python3 http.client with Host"
first_writes_spaced "python3 http.client" 3

# Names no section wants: nothing held, nothing broken.
run sh -c 'for i in 1 2 3; do
	[ "$(curl -sS -H "Host: other.test" "http://127.0.0.1:$1/o$i")" = "hello /o$i" ] || exit 1
done' _ "$PORT" || fail "curl, unmatched Host"
[ "$(grep -c 'no section matches' "$T/shim.log")" -eq 3 ] || fail "unmatched Host: $(cat "$T/shim.log")"
! grep -q ' go ' "$T/shim.log" || fail "an unmatched name was held: $(grep ' go ' "$T/shim.log")"
: >"$T/shim.log"

# TLS SNI: blocking s_client, then curl (non-blocking) over a hand-made resolve.
run sh -c 'for i in 1 2 3; do
	printf "GET / HTTP/1.0\r\n\r\n" | openssl s_client -quiet -connect "127.0.0.1:$1" \
		-servername api.sni.test 2>>"$2/s_client.err" | grep -q "s_server" || exit 1
done' _ "$tls_port" "$T" || fail "openssl s_client: $(tail -5 "$T/s_client.err")"
first_writes_spaced "openssl s_client -servername" 3 "$T/first-tls"
run sh -c 'for i in 1 2; do
	curl -sS -k --resolve "api.sni.test:$1:127.0.0.1" "https://api.sni.test:$1/" | grep -q s_server || exit 1
done' _ "$tls_port" || fail "curl https by SNI"
first_writes_spaced "curl https" 2 "$T/first-tls"

# Through a proxy: CONNECT tunnel.test:PORT, and GET http://plain.test:PORT/...
run sh -c 'for i in 1 2 3; do
	[ "$(curl -sS -p -x "http://127.0.0.1:$1" "http://tunnel.test:$2/t$i")" = "hello /t$i" ] || exit 1
done' _ "$proxy" "$PORT" || fail "curl through CONNECT"
first_writes_spaced "curl -p (CONNECT)" 3 "$T/first-proxy"
run sh -c 'for i in 1 2 3; do
	[ "$(curl -sS -x "http://127.0.0.1:$1" "http://plain.test:$2/a$i")" = "hello /a$i" ] || exit 1
done' _ "$proxy" "$PORT" || fail "curl through a proxy, absolute-form"
first_writes_spaced "curl -x (absolute-form)" 3 "$T/first-proxy"
# A name found in the first write also brings sections metering requests: each
# keep-alive request to req.named.test is held, on a connection made to an address.
write_config "$T/req.ini" <<EOF
[by-name-per-request]
match = req.named.test
meter = requests
rate = 10/s
max_wait = 1m
EOF
start_witness request "$PORT" "$T/requests"
"$SLUICE" run -c "$T/req.ini" -- python3 -c '
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
for i in range(4):
    c.request("GET", "/q%d" % i, headers={"Host": "req.named.test"})
    assert c.getresponse().read() == b"hello /q%d\n" % i
' "$PORT" || fail "requests by name"
witnessed "$T/requests" --interval-ms 100 --expect 4 --what "requests by name" || fail "requests by name: spacing"
[ "$(grep -c ' request .* go ' "$T/shim.log")" -eq 4 ] || fail "requests by name were not held as requests"
echo "ok"
