#!/usr/bin/env bash
# make bench, item 22: real clients the shim once missed, at the destination
# (the server's receive times, CLOCK_MONOTONIC): perl LWP with keep-alive under
# meter = requests at 20/s (it sleeps 100 ms on an EAGAIN), PHP's curl_exec (an
# extension opened with RTLD_DEEPBIND) at 20/s, and getent through glibc's
# resolver under sluice run --seccomp at 20/s (a network and mount namespace of
# its own, a name server on its 127.0.0.1:53).  Prints delivered against
# configured and the smallest gap.  Usage: bench/clients.sh (BUILD=build).
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
exit 0
