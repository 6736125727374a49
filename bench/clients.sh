#!/usr/bin/env bash
# make bench, item 22: real clients the shim once missed, at the destination
# (the server's receive times, CLOCK_MONOTONIC): perl LWP with keep-alive under
# meter = requests at 20/s (it sleeps 100 ms on an EAGAIN), PHP's curl_exec (an
# extension opened with RTLD_DEEPBIND) at 20/s, and getent through glibc's
# resolver under sluice run --seccomp at 20/s (a network and mount namespace of
# its own, a name server on its 127.0.0.1:53); aiohttp and node fetch (undici)
# at 500-5,000/s, a connection a request, their SYNs and first writes; node's http2
# with 200 POSTs at 40/s, each request begun and whole at the server; git push
# and rsync over ssh at 1 MiB/s of bytes.  Prints delivered against configured
# and the smallest gap.  Usage: bench/clients.sh (BUILD=build).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "$ROOT/${BUILD:-build}" && pwd)
H="$ROOT/tests/integration/helpers"
T=$(mktemp -d /tmp/sluice-bench-clients.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
export SLUICE_QUIET=1

figures() { # LABEL FILE RATE: delivered against RATE, smallest gap
	python3 - "$@" <<'EOF'
import sys
label, path, rate = sys.argv[1], sys.argv[2], float(sys.argv[3])
t = sorted(int(l.split()[0]) for l in open(path) if l.strip())
if len(t) < 2:
    print("   %-34s too few arrivals (%d)" % (label, len(t)))
    sys.exit(0)
gaps = [(b - a) / 1e6 for a, b in zip(t, t[1:])]
got = (len(t) - 1) / ((t[-1] - t[0]) / 1e9)
print("   %-34s %3d at %.2f/s of %g/s (%.1f%%), smallest gap %.3f ms"
      % (label, len(t), got, rate, 100 * got / rate, min(gaps)))
EOF
}
config() { # FILE PORT METER
	printf '[sluice]\nshm_name = /sluice-bench-clients-%s\ncontrol_socket = %s/ctl.sock\n\n[c]\nmatch = 127.0.0.1:%s\nmeter = %s\nrate = 20/s\nmax_wait = 1m\n' \
		"$$" "$T" "$2" "$3" >"$1"
}

python3 "$H/server.py" --port-file "$T/port" --log "$T/http.log" --lifetime 300 &
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
port=$(cat "$T/port")

config "$T/lwp.ini" "$port" requests
: >"$T/http.log"
"$B/sluice" run -c "$T/lwp.ini" -- perl -MLWP::UserAgent -e '
	my $ua = LWP::UserAgent->new(timeout => 10, keep_alive => 1);
	$ua->get("http://127.0.0.1:$ARGV[0]/l$_") for 1 .. 100;' "$port" >/dev/null 2>&1
figures "perl LWP keep-alive, requests:" "$T/http.log" 20

config "$T/php.ini" "$port" connections
: >"$T/http.log"
"$B/sluice" run -c "$T/php.ini" -- php -r '
	for ($i = 0; $i < 60; $i++) { $c = curl_init("http://127.0.0.1:" . $argv[1] . "/p$i");
		curl_setopt($c, CURLOPT_RETURNTRANSFER, true); curl_exec($c); }' "$port" >/dev/null 2>&1
figures "php curl_exec, connections:" "$T/http.log" 20

# Event loops at 500-5,000/s, a connection a request (meter = connections),
# 3 s worth of requests begun at once: the SYNs (what the section holds) and the
# requests' first segments as the destination's kernel stamped them, against a
# C server (bench/http_answer.c; python's test server, not the clients, set
# the pace above 1,000/s).  The first writes keep their own line (sent at
# their slots by the shim's kicker: docs/design.md, "First writes on time").
# Each client also times itself, first request to last answer, shaped and
# unshaped: where the client cannot reach the rate unshaped on this machine,
# what it reaches unshaped is the measure ("of reach").
witness() { # WHAT FILE PORT
	python3 "$H/syn_witness.py" --port "$3" --out "$2" --what "$1" --ready-file "$2.ready" --lifetime 60 &
	for _ in $(seq 50); do [ -s "$2.ready" ] && break; sleep 0.1; done
}
event_loop() { # CLIENT PORT COUNT [PREFIX...]: prints the client's own seconds
	local client=$1 p=$2 n=$3
	shift 3
	if [ "$client" = aiohttp ]; then # Debian's python3, with aiohttp
		"$@" /usr/bin/python3 -c '
import asyncio, aiohttp, sys, time
async def main():
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, force_close=True)) as s:
        async def one(i):
            async with s.get("http://127.0.0.1:%s/a%d" % (sys.argv[1], i)) as r:
                await r.read()
        t = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(int(sys.argv[2]))))
        print("%.3f" % (time.monotonic() - t))
asyncio.run(main())' "$p" "$n" 2>"$T/ev.err" || sed 's/^/   aiohttp: /' "$T/ev.err" | tail -n 3 >&2
	else
		"$@" node -e '
const t = performance.now();
Promise.all(Array.from({length: +process.argv[2]}, (_, i) => fetch(`http://127.0.0.1:${process.argv[1]}/n${i}`,
	{headers: {connection: "close"}}).then(r => r.text())))
	.then(() => console.log(((performance.now() - t) / 1000).toFixed(3))).catch(() => process.exit(1));' "$p" "$n" \
			2>"$T/ev.err" || sed 's/^/   undici: /' "$T/ev.err" | tail -n 3 >&2
	fi
}
echo "   event loops, 3 s of requests begun at once (client's own clock; 'of reach' = against min(rate, unshaped)):"
for rate in 500 1000 2000 5000; do
	for client in aiohttp undici; do
		n=$((rate * 3))
		rm -f "$T/ev.port"
		"$B/bench/http_answer" "$T/ev.port" 60 &
		srv=$!
		for _ in $(seq 50); do [ -s "$T/ev.port" ] && break; sleep 0.1; done
		evport=$(cat "$T/ev.port")
		printf '[sluice]\nshm_name = /sluice-bench-ev-%s\ncontrol_socket = %s/ev.sock\n\n[ev]\nmatch = 127.0.0.1:%s\nrate = %s/s\nmax_wait = 1m\n' \
			"$$" "$T" "$evport" "$rate" >"$T/ev.ini"
		plain=$(event_loop $client "$evport" $n env)
		: >"$T/syn" && : >"$T/first"
		witness syn "$T/syn" "$evport"
		w1=$!
		witness first "$T/first" "$evport"
		w2=$!
		shaped=$(event_loop $client "$evport" $n "$B/sluice" run -c "$T/ev.ini" --)
		sleep 0.3
		kill "$w1" "$w2" "$srv" 2>/dev/null
		wait "$w1" "$w2" "$srv" 2>/dev/null
		python3 - "$client" "$rate" "$n" "${plain:-0}" "${shaped:-0}" "$T/syn" "$T/first" <<'PY'
import sys
client, rate, n, plain, shaped = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
def span(path):
    t = sorted(int(l.split()[0]) for l in open(path) if l.strip())
    return (len(t) - 1) / ((t[-1] - t[0]) / 1e9) if len(t) > 1 else 0, len(t)
syn, ns = span(sys.argv[6])
first, nf = span(sys.argv[7])
reach = n / plain if plain else 0
got = n / shaped if shaped else 0
print("   %-7s %4d/s: SYNs %5.1f%% (%d), first writes %5.1f%% (%d); %d requests in %.2f s (unshaped %.2f s, %.0f/s): %.1f%% of reach"
      % (client, rate, 100 * syn / rate, ns, 100 * first / rate, nf, n, shaped, plain, reach,
         100 * got / min(rate, reach) if reach else 0))
PY
	done
done

# HTTP/2 bodies: node's http2 (nghttp2, as grpc-js) with 200 POSTs of 200 bytes begun at once
# on one h2c connection at 40/s - when the server had each request begun
# (HEADERS) and whole (its body), the kernel's receive stamps.
/usr/bin/python3 "$H/h2_server.py" --port-file "$T/h2.port" --log "$T/h2.begun" --ends "$T/h2.whole" \
	--lifetime 120 &
for _ in $(seq 50); do [ -s "$T/h2.port" ] && break; sleep 0.1; done
h2port=$(cat "$T/h2.port")
printf '[sluice]\nshm_name = /sluice-bench-h2-%s\ncontrol_socket = %s/h2.sock\n\n[h2]\nmatch = 127.0.0.1:%s\nmeter = requests\nrate = 40/s\nmax_wait = 1m\n' \
	"$$" "$T" "$h2port" >"$T/h2.ini"
"$B/sluice" run -c "$T/h2.ini" -- node "$H/h2_posts.js" "http://127.0.0.1:$h2port" 200 200 >/dev/null 2>&1
figures "node http2 POSTs 40/s, begun:" "$T/h2.begun" 40
figures "node http2 POSTs 40/s, whole:" "$T/h2.whole" 40

unshare -mn bash -c '
	T=$1 B=$2 H=$3
	ip link set lo up
	echo "nameserver 127.0.0.1" >"$T/resolv.conf"; echo "127.0.0.1 localhost" >"$T/hosts"
	echo "hosts: files dns" >"$T/nss"
	mount --bind "$T/resolv.conf" /etc/resolv.conf && mount --bind "$T/hosts" /etc/hosts &&
		mount --bind "$T/nss" /etc/nsswitch.conf || exit 1
	python3 "$H/dns_server.py" --port 53 --port-file "$T/dport" --log "$T/dns.log" --lifetime 120 &
	for _ in $(seq 50); do [ -s "$T/dport" ] && break; sleep 0.1; done
	printf "[sluice]\nshm_name = /sluice-bench-dns-%s\ncontrol_socket = %s/dctl.sock\n\n[ns]\nmatch = 127.0.0.1:53\nmeter = datagrams\nrate = 20/s\nmax_wait = 1m\n" $$ "$T" >"$T/dns.ini"
	"$B/sluice" run --seccomp -c "$T/dns.ini" -- sh -c "for i in \$(seq 30); do getent hosts g\$i.test; done" >/dev/null 2>&1
	kill %1 2>/dev/null
' sh "$T" "$B" "$H" || echo "   (no network namespace here: getent not measured)"
[ -s "$T/dns.log" ] && figures "getent under --seccomp, datagrams:" "$T/dns.log" 20

# Bytes over ssh: git push and rsync of 8 MiB at 1 MiB/s (meter = bytes) through
# an sshd of its own on loopback, and the upload's rate at the destination from
# its first large segment to its last (the handshake and git's packing before
# it are the program's own time).  Target: >= 99%.
ssh_bench() {
	local d="$T/sshd" sport
	mkdir -p "$d" /run/sshd
	ssh-keygen -q -t ed25519 -N '' -f "$d/host_key" && ssh-keygen -q -t ed25519 -N '' -f "$d/user_key" || return 1
	cp "$d/user_key.pub" "$d/authorized_keys"
	sport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	printf 'Port %s\nListenAddress 127.0.0.1\nHostKey %s\nAuthorizedKeysFile %s\nUsePAM no\nStrictModes no\nPidFile %s\nLogLevel ERROR\n' \
		"$sport" "$d/host_key" "$d/authorized_keys" "$d/sshd.pid" >"$d/config"
	/usr/sbin/sshd -D -f "$d/config" -E "$d/log" &
	local ssh="ssh -i $d/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -p $sport"
	for _ in $(seq 50); do $ssh root@127.0.0.1 true 2>/dev/null && break; sleep 0.1; done
	printf '[sluice]\nshm_name = /sluice-bench-ssh-%s\ncontrol_socket = %s/ssh.sock\n\n[ssh]\nmatch = 127.0.0.1:%s\nmeter = bytes\nrate = 1M/s\nmax_wait = 1m\n' \
		"$$" "$T" "$sport" >"$T/ssh.ini"
	git init -q --bare "$T/remote.git" && git init -q "$T/work" || return 1
	head -c $((8 << 20)) /dev/urandom >"$T/work/blob.bin"
	git -C "$T/work" add blob.bin && git -C "$T/work" -c user.name=b -c user.email=b@b commit -q -m b
	head -c $((8 << 20)) /dev/urandom >"$T/r.bin"
	for what in "git push" rsync; do
		python3 "$H/syn_witness.py" --port "$sport" --out "$T/ssh.bytes" --what bytes --ready-file "$T/ssh.ready" \
			--lifetime 120 &
		local w=$!
		for _ in $(seq 50); do [ -s "$T/ssh.ready" ] && break; sleep 0.1; done
		if [ "$what" = rsync ]; then
			"$B/sluice" run -c "$T/ssh.ini" -- rsync -e "$ssh" "$T/r.bin" "root@127.0.0.1:$T/r.copy"
		else
			GIT_SSH_COMMAND="$ssh" "$B/sluice" run -c "$T/ssh.ini" -- git -C "$T/work" push -q \
				"ssh://root@127.0.0.1:$sport$T/remote.git" HEAD:refs/heads/main
		fi
		sleep 0.3
		kill "$w" 2>/dev/null
		wait "$w" 2>/dev/null
		printf '   %-34s ' "$what over ssh, 1 MiB/s:"
		python3 "$H/bytes_check.py" "$T/ssh.bytes" --rate $((1 << 20)) --piece 20971 --span 1 --slack-ms 5 \
			--floor 0 | tr '\n' ' ' | sed 's/ at the destination//'
		echo
		rm -f "$T/ssh.bytes" "$T/ssh.ready"
	done
}
ssh_bench || echo "   (ssh not measured)"
exit 0
