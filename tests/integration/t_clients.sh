#!/usr/bin/env bash
# tier: parallel
# Real clients through the shim, each shaped and each still working: node's http
# client (libuv, epoll), wget, curl --parallel with keep-alive off, and openssl
# s_client against a local TLS server.  Spacing is checked on the kernel times of
# the SYNs at the destination; every response must arrive intact.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/c.ini" <<EOF
[web]
match = 127.0.0.1:$PORT
rate = 10/s
max_wait = 1m
EOF
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"
connects_spaced() { # NAME COUNT [FILE]: connections spaced at the destination (FILE, by
	# default the HTTP server's), the right count
	expect_spaced "${3:-$T/arrivals}" 100 "$2" "$1 connects"
}
start_witness syn "$PORT" "$T/arrivals"

command -v node >/dev/null || fail "node is missing (scripts/deps.sh installs nodejs)"
{
	"$SLUICE" run -c "$T/c.ini" -- node -e '
		const http = require("http"), port = +process.argv[1];
		let left = 8;
		for (let i = 0; i < 8; i++)
			http.get({host: "127.0.0.1", port, path: "/n" + i, agent: false}, r => {
				let b = "";
				r.on("data", d => b += d);
				r.on("end", () => {
					if (b !== "hello /n" + i + "\n") { console.error("bad body", b); process.exit(1); }
					if (--left === 0) process.exit(0);
				});
			}).on("error", e => { console.error(e); process.exit(1); });
		setTimeout(() => { console.error("timed out"); process.exit(1); }, 20000);
	' "$PORT" || fail "node client"
	connects_spaced node 8
}

"$SLUICE" run -c "$T/c.ini" -- sh -c '
	for i in 1 2 3 4 5; do
		[ "$(wget -q -O - "http://127.0.0.1:$1/w$i")" = "hello /w$i" ] || exit 1
	done' _ "$PORT" || fail "wget"
connects_spaced wget 5

urls=()
for i in $(seq 8); do urls+=("http://127.0.0.1:$PORT/c$i"); done
"$SLUICE" run -c "$T/c.ini" -- curl -sS --parallel --parallel-max 8 --no-keepalive \
	-H "Connection: close" "${urls[@]}" >"$T/curl.out" || fail "curl --parallel"
[ "$(grep -c '^hello /c' "$T/curl.out")" -eq 8 ] || fail "curl --parallel bodies: $(cat "$T/curl.out")"
connects_spaced "curl --parallel" 8

# TLS: openssl s_server with a throw-away certificate, s_client four times.
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -days 1 \
	-keyout "$T/key.pem" -out "$T/cert.pem" >/dev/null 2>&1 || fail "cannot make a certificate"
tls_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
openssl s_server -quiet -accept "127.0.0.1:$tls_port" -cert "$T/cert.pem" -key "$T/key.pem" -www \
	>/dev/null 2>&1 &
BG_PIDS+=($!)
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$tls_port") 2>/dev/null && break; sleep 0.1; done
start_witness syn "$tls_port" "$T/arrivals-tls"
write_config "$T/t.ini" <<EOF
[tls]
match = 127.0.0.1:$tls_port
rate = 10/s
EOF
"$SLUICE" run -c "$T/t.ini" -- sh -c '
	for i in 1 2 3 4; do
		printf "GET / HTTP/1.0\r\n\r\n" | openssl s_client -quiet -connect "127.0.0.1:$1" \
			-servername localhost 2>>"$2/s_client.err" | grep -q "s_server" || exit 1
	done' _ "$tls_port" "$T" || fail "openssl s_client: $(tail -5 "$T/s_client.err")"
connects_spaced "openssl s_client" 4 "$T/arrivals-tls"
