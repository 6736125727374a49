#!/usr/bin/env bash
# make bench, item 18: the delivered table (docs/guarantees.md "Is it giving what I
# configured?").  For each kind of client and each rate, a queue standing from
# the first connection to the last, judged at the destination by the kernel's SYN
# stamps (an nginx on loopback answers them; the rows of python processes and of
# the fleet, whose clients cannot keep it standing while they start and finish,
# run to one deadline and leave their first second out):
#   delivered     arrivals a second over the run, against the configured rate
#   smallest gap  the closest two arrivals, in intervals (1.000: never closer)
#                 (a fleet's machines are not one queue: its gaps say little)
#   p99 behind    how far arrivals ran behind a schedule that never waits (the
#                 first arrival plus k intervals), 99th percentile: lateness that
#                 accumulates, as every late release delays the ones after it
#   unshaped      the same client with nothing shaping it (its own count, all at
#                 once): the most connections it began in one second, and how
#                 many a second it kept up over the whole run.  A cell far below
#                 them is sluice's shortfall, not the client's; a cell below 99.5%
#                 whose rate the client cannot keep up even unshaped says so (an
#                 event loop doing all its own work on one core: python asyncio
#                 kept up 4,500/s of 5,000 on a 2-core machine also running the
#                 server).  Blocking clients flood the server's backlog unshaped
#                 and stall on SYN retries, so theirs is a floor, not a ceiling
# and, in the same run, nginx's limit_req as an egress proxy (burst large enough
# that it delays rather than refuses) as the reference.  A client that cannot
# offer a rate (curl processes start a few hundred a second here) is not run at it.
# The veth rows send the blocking and static clients over a veth pair into a
# network namespace the script makes (and removes), the witness on its far end,
# after a line timing the connect call itself on loopback and over veth.
#   DELIVERED_RATES="10 100"   DELIVERED_SECONDS=4   override the defaults.
. "$(dirname "$0")/../tests/integration/fleet_lib.sh"

B=$BUILD_DIR
RATES=${DELIVERED_RATES:-10 100 1000 5000}
SECS=${DELIVERED_SECONDS:-6}
NGINX=/usr/sbin/nginx
[ -x "$NGINX" ] || fail "nginx is missing (scripts/deps.sh bench installs nginx-light)"
command -v node >/dev/null || fail "node is missing (scripts/deps.sh bench installs nodejs)"
ulimit -n 65536 2>/dev/null || ulimit -n 20000

PORT=$(free_port)
for q in 100 1000; do eval "PROXY_$q=\$(free_port)"; done
# A UDP sink for the datagrams row.
python3 "$ROOT/tests/integration/helpers/udp_sink.py" --port-file "$T/uport" --log /dev/null --lifetime 7200 &
BG_PIDS+=($!)
for _ in $(seq 50); do [ -s "$T/uport" ] && break; sleep 0.1; done
UPORT=$(cat "$T/uport")
# nginx_conf DIR: an nginx config keeping its pid, log and temporary files under
# DIR (which must exist), the servers of its http block read from stdin.
nginx_conf() {
	cat <<EOF
daemon off;
master_process off;
pid $1/nginx.pid;
error_log $1/error.log;
events { worker_connections 32768; }
http {
	access_log off;
	client_body_temp_path $1/body;
	proxy_temp_path $1/proxy;
	fastcgi_temp_path $1/fastcgi;
	uwsgi_temp_path $1/uwsgi;
	scgi_temp_path $1/scgi;
EOF
	cat
	echo "}"
}
mkdir -p "$T/nginx"
nginx_conf "$T/nginx" >"$T/nginx/nginx.conf" <<EOF
	# The destination, on each machine's address.
	server {
		listen 127.0.0.1:$PORT backlog=8192;
		listen 127.0.1.1:$PORT backlog=8192;
		listen 127.0.1.2:$PORT backlog=8192;
		listen 127.0.1.3:$PORT backlog=8192;
		listen 127.0.2.1:$PORT backlog=8192; # the keyed fleet's endpoint
		keepalive_requests 1000000; # the requests row keeps one connection a process
		location / { return 200 "ok\n"; }
	}
	# The reference: nginx as an egress proxy, limit_req holding it to a rate.
	limit_req_zone \$server_port zone=r100:1m rate=100r/s;
	limit_req_zone \$server_port zone=r1000:1m rate=1000r/s;
	server {
		listen 127.0.0.1:$PROXY_100;
		location / { limit_req zone=r100 burst=100000; proxy_pass http://127.0.0.1:$PORT; }
	}
	server {
		listen 127.0.0.1:$PROXY_1000;
		location / { limit_req zone=r1000 burst=100000; proxy_pass http://127.0.0.1:$PORT; }
	}
EOF
"$NGINX" -c "$T/nginx/nginx.conf" -e "$T/nginx/error.log" &
BG_PIDS+=($!)
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.1; done

# config NAME RATE: a private segment's config for one cell.
cell_config() {
	cat >"$T/$1.ini" <<EOF
[sluice]
shm_name = /sluice-delivered-$$-$1
control_socket = $T/$1.sock

[dest]
match = 127.0.0.1:$PORT
rate = $2/s
max_wait = 10m
EOF
}

# figures RATE FILE [SKIP_S]: "delivered% smallest-gap p99-behind-ms", from a
# witness record, leaving out its first SKIP_S seconds.
figures() {
	python3 - "$1" "$2" "${3:-0}" <<'PY'
import sys
rate, path, skip = float(sys.argv[1]), sys.argv[2], float(sys.argv[3])
t = sorted(int(l.split()[0]) for l in open(path) if l.strip())
t = [x for x in t if x >= t[0] + skip * 1e9] if t else t
if len(t) < 3:
    print("- - -")
    sys.exit()
interval = 1e9 / rate
got = (len(t) - 1) / ((t[-1] - t[0]) / 1e9)
gap = min(b - a for a, b in zip(t, t[1:])) / interval
behind = sorted(max(0.0, (x - t[0] - k * interval) / 1e6) for k, x in enumerate(t))
print("%.2f%% %.3f %.1f" % (100 * got / rate, gap, behind[int(0.99 * (len(behind) - 1))]))
PY
}

row() { # row KIND RATE FILE [SKIP_S [CEILING: PEAK/SUSTAINED]]
	local kept=${5:-} why=""
	kept=${kept#*/}
	read -r pct gap behind < <(figures "$2" "$3" "${4:-0}")
	[ "${CLIENT_RC:-0}" = 0 ] || why="  (the client failed: exit $CLIENT_RC, see $T/clients.err)"
	# Short of 99.5%, at a rate the client did not keep up unshaped, and within a
	# tenth of what it did keep up: the client's ceiling, not sluice's (a blocking
	# client's unshaped figure is a floor: shaped it may deliver well above it).
	if [ -z "$why" ] && [[ "$kept" =~ ^[0-9]+$ ]] && [ "$kept" -lt "$2" ] &&
		awk -v p="${pct%\%}" -v r="$2" -v k="$kept" 'BEGIN { exit !(p < 99.5 && p * r / 100 <= 1.1 * k) }'; then
		why="  (the client alone keeps up only ${kept}/s here: the cell measures it)"
	fi
	printf '   %-24s %6s/s %9s %9s I %10s ms %12s/s%s\n' "$1" "$2" "$pct" "$gap" "$behind" "${5:--}" "$why"
}

# witness_run FILE CMD...: the SYNs to $PORT while CMD runs (WITNESS_WHAT and
# WITNESS_PORT for other packets and ports).
witness_run() {
	local file=$1
	shift
	: >"$file"
	start_syn_witness "${WITNESS_PORT:-$PORT}" "$file"
	"$@" >/dev/null 2>>"$T/clients.err"
	CLIENT_RC=$?
	sleep 0.3
	kill "$WITNESS_PID" 2>/dev/null
	wait "$WITNESS_PID" 2>/dev/null
}

procs() { # procs N EACH PROGRAM: N copies of PROGRAM connecting EACH times to ${DEST:-127.0.0.1}
	local n=$1 each=$2 prog=$3 i
	for i in $(seq "$n"); do "$prog" "${DEST:-127.0.0.1}" "$PORT" "$each" >/dev/null & done
	wait
}

# The event-loop clients start N connections, at most OPEN_MAX of them open at
# once (a new one as each ends): 30,000 at once would run past the descriptor
# limit (20,000 here, and no raising it without CAP_SYS_RESOURCE), and node dies
# of the first EMFILE.  A lane opens its next socket before its loop has closed
# the last one (asyncio closes a transport on the loop's next turn, node destroys
# a socket after 'end'), so a lane may hold two: OPEN_MAX is under half the
# limit.  8,000 queued is 1.6 s of the fastest rate: a queue still stands
# throughout.
OPEN_MAX=$(( ($(ulimit -n) - 1000) / 2 ))
[ "$OPEN_MAX" -gt 8000 ] && OPEN_MAX=8000
export OPEN_MAX # read by the clients run through bash -c
# LOOP=uvloop: the same client on uvloop (libuv's loop), with Debian's python3,
# where deps.sh installs it.
asyncio_client() {
	local py=python3
	[ "${LOOP:-}" = uvloop ] && py=/usr/bin/python3
	"$py" -c '
import asyncio, os, sys
if os.environ.get("LOOP") == "uvloop":
    import uvloop
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
port, n, most = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
async def one(i):
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(b"GET /a%d HTTP/1.0\r\n\r\n" % i); await w.drain(); await r.read(); w.close()
async def lane(k):
    for i in range(k, n, most):
        await one(i)
async def main():
    await asyncio.gather(*(lane(k) for k in range(min(n, most))))
asyncio.run(main())' "$PORT" "$1" "$OPEN_MAX"
}

# stop_after SECONDS PID...: stop clients together at a deadline; fails when one
# of them had already ended (each is given more than it can send by then).
stop_after() {
	local secs=$1 pid early=0
	shift
	sleep "$secs"
	for pid in "$@"; do kill -0 "$pid" 2>/dev/null || early=1; done
	kill "$@" 2>/dev/null
	wait "$@" 2>/dev/null
	return $early
}

# The other meters, from 8 blocking python3 processes: keep-alive GETs on one
# connection each (the witness stamps each request's first segment), and
# datagrams sent each with its address to a UDP sink.  Each process has the whole
# cell to send and all are stopped together after SECONDS, the first of which
# the row leaves out: python takes tens of milliseconds to start, and at 5,000/s
# the last processes to finish a count could not keep a queue standing alone
# (a request's round trip in python is longer than the interval), so counted
# runs measured the clients' start and end (98.7%) rather than the queue
# (99.9% between them).
python_clients() { # python_clients SECONDS PROGRAM ARGS...: 8 of them, to the deadline
	local secs=$1 i pids=()
	shift
	for i in $(seq 8); do
		python3 -c "$@" &
		pids+=($!)
	done
	stop_after "$secs" "${pids[@]}"
}

requests_client() { # requests_client COUNT SECONDS
	python_clients "$2" '
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
for i in range(int(sys.argv[2])):
    c.request("GET", "/r%d" % i)
    c.getresponse().read()' "$PORT" "$1"
}

datagram_client() { # datagram_client UDP_PORT COUNT SECONDS
	python_clients "$3" '
import socket, sys
s, a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), ("127.0.0.1", int(sys.argv[1]))
for i in range(int(sys.argv[2])):
    s.sendto(b"d%d" % i, a)' "$1" "$2"
}

node_client() {
	node -e '
const h = require("http");
const port = +process.argv[1], n = +process.argv[2], most = +process.argv[3];
let started = 0, left = n;
function one() {
	const i = started++;
	h.get({host: "127.0.0.1", port: port, path: "/n" + i, agent: false}, r => {
		r.resume();
		r.on("end", () => { if (--left === 0) process.exit(0); if (started < n) one(); });
	});
}
for (let k = 0; k < Math.min(n, most); k++) one();' "$PORT" "$1" "$OPEN_MAX"
}

curl_client() { # curl_client N: 8 loops of sequential curl processes, N in all
	local i pids=()
	for i in $(seq 8); do
		(for _ in $(seq $(($1 / 8))); do curl -s -m 60 -o /dev/null "http://127.0.0.1:$PORT/c"; done) &
		pids+=($!)
	done
	wait "${pids[@]}" # only these: the shell's nginx and witnesses run on
}

# How many curl processes a second this machine can start, unshaped: rates past
# most of it would measure curl, not sluice.
t0=$(now_ns)
curl_client 160
curl_max=$(awk -v a="$t0" -v b="$(now_ns)" 'BEGIN { printf "%d", 160 / ((b - a) / 1e9) }')

# offered FILE: the most connections begun in any one second of a witness record
# (a flood overruns the server's backlog and SYNs are sent again: a SYN from a
# port seen in the last 3 s is such a retry, not a connection).
offered() {
	python3 - "$1" <<'PY'
import bisect, sys
seen, t = {}, []
for ns, port in sorted((int(l.split()[0]), l.split()[2]) for l in open(sys.argv[1]) if l.strip()):
    if port not in seen or ns - seen[port] > 3e9:
        t.append(ns)
    seen[port] = ns
if len(t) < 2:
    print("-")
else:
    peak = max(bisect.bisect_left(t, x + 1e9) - i for i, x in enumerate(t))
    print("%d/%d" % (peak, (len(t) - 1) / ((t[-1] - t[0]) / 1e9)))
PY
}

# What each client offers with nothing shaping it, at the top rate's count: a
# cell above most of it measures the client, not sluice.  The static program is
# measured under the supervisor with nothing matched too: the trap's own cost.
top=0
for rate in $RATES; do [ "$rate" -gt "$top" ] && top=$rate; done
n=$((top * SECS))
each=$(((n + 7) / 8))
cell_config u 1
sed -i "s/^match = .*/match = 127.0.0.2:1/" "$T/u.ini"
declare -A ceiling
witness_run "$T/w" bash -c "$(declare -f procs); PORT=$PORT procs 8 $each $B/bench/connect_loop"
ceiling[procs]=$(offered "$T/w")
witness_run "$T/w" "$B/bench/connect_threads" 127.0.0.1 "$PORT" 8 "$each"
ceiling[threads]=$(offered "$T/w")
witness_run "$T/w" bash -c "$(declare -f asyncio_client); PORT=$PORT asyncio_client $n"
ceiling[asyncio]=$(offered "$T/w")
witness_run "$T/w" bash -c "$(declare -f asyncio_client); LOOP=uvloop PORT=$PORT asyncio_client $n"
ceiling[uvloop]=$(offered "$T/w")
witness_run "$T/w" bash -c "$(declare -f node_client); PORT=$PORT node_client $n"
ceiling[node]=$(offered "$T/w")
witness_run "$T/w" "$B/sluice" run --seccomp -c "$T/u.ini" -- \
	bash -c "$(declare -f procs); PORT=$PORT procs 8 $each $B/bench/connect_loop_static"
ceiling[static]=$(offered "$T/w")
ceiling[curl]=$curl_max/$curl_max
ceiling[fleet]=-

echo "18. delivered at the destination, a queue standing throughout (kernel SYN stamps)"
echo "    (unshaped: the most connections the client began in one second with nothing shaping it /"
echo "     how many a second it kept up over the whole run)"
printf '   %-24s %8s %9s %11s %13s %14s\n' "client" "rate" "delivered" "smallest gap" "p99 behind" "unshaped"
for rate in $RATES; do
	n=$((rate * SECS))
	[ "$n" -lt 40 ] && n=40
	each=$(((n + 7) / 8))
	cell_config c "$rate"
	run() { "$B/sluice" run -c "$T/c.ini" -- "$@"; }
	witness_run "$T/w" run bash -c "$(declare -f procs); PORT=$PORT procs 8 $each $B/bench/connect_loop"
	row "C, 8 processes" "$rate" "$T/w" 0 "${ceiling[procs]}"
	witness_run "$T/w" run "$B/bench/connect_threads" 127.0.0.1 "$PORT" 8 "$each"
	row "C, 8 threads" "$rate" "$T/w" 0 "${ceiling[threads]}"
	witness_run "$T/w" run bash -c "$(declare -f asyncio_client); PORT=$PORT asyncio_client $n"
	row "python asyncio" "$rate" "$T/w" 0 "${ceiling[asyncio]}"
	witness_run "$T/w" run bash -c "$(declare -f asyncio_client); LOOP=uvloop PORT=$PORT asyncio_client $n"
	row "python uvloop" "$rate" "$T/w" 0 "${ceiling[uvloop]}"
	witness_run "$T/w" run bash -c "$(declare -f node_client); PORT=$PORT node_client $n"
	row "node" "$rate" "$T/w" 0 "${ceiling[node]}"
	if [ "$rate" -le $((curl_max * 3 / 4)) ]; then
		witness_run "$T/w" run bash -c "$(declare -f curl_client); PORT=$PORT curl_client $((each * 8))"
		row "curl, 8 process loops" "$rate" "$T/w" 0 "${ceiling[curl]}"
	else
		printf '   %-24s %6s/s   (not run: curl starts about %d processes a second here)\n' \
			"curl, 8 process loops" "$rate" "$curl_max"
	fi
	witness_run "$T/w" "$B/sluice" run --seccomp -c "$T/c.ini" -- \
		bash -c "$(declare -f procs); PORT=$PORT procs 8 $each $B/bench/connect_loop_static"
	row "static C, --seccomp" "$rate" "$T/w" 0 "${ceiling[static]}"
	# A keyed section (one queue per address: the one key here), and the other
	# meters.
	cell_config k "$rate"
	echo "per = address" >>"$T/k.ini"
	witness_run "$T/w" "$B/sluice" run -c "$T/k.ini" -- \
		bash -c "$(declare -f procs); PORT=$PORT procs 8 $each $B/bench/connect_loop"
	row "C, 8 processes, keyed" "$rate" "$T/w"
	cell_config r "$rate"
	echo "meter = requests" >>"$T/r.ini"
	WITNESS_WHAT=request witness_run "$T/w" "$B/sluice" run -c "$T/r.ini" -- \
		bash -c "$(declare -f stop_after python_clients requests_client); PORT=$PORT requests_client $n $((SECS + 1))"
	row "requests, 8 python3" "$rate" "$T/w" 1
	cell_config g "$rate"
	sed -i "s/^match = .*/match = 127.0.0.1:$UPORT/" "$T/g.ini"
	echo "meter = datagrams" >>"$T/g.ini"
	WITNESS_WHAT=datagram WITNESS_PORT=$UPORT witness_run "$T/w" "$B/sluice" run -c "$T/g.ini" -- \
		bash -c "$(declare -f stop_after python_clients datagram_client); datagram_client $UPORT $n $((SECS + 1))"
	row "datagrams, 8 python3" "$rate" "$T/w" 1
done

# tolerance (docs/config.md): the clients whose releases come late most - event
# loops and requests at 5,000/s, the static client's trapped connects at 100/s -
# with strict spacing and with 1 ms of lateness made up, one after the other.
echo "    tolerance = 0 and 1ms, the same clients back to back:"
for tol in 0 1ms; do
	cell_config t 5000
	echo "tolerance = $tol" >>"$T/t.ini"
	n=$((5000 * SECS))
	witness_run "$T/w" "$B/sluice" run -c "$T/t.ini" -- bash -c "$(declare -f asyncio_client); PORT=$PORT asyncio_client $n"
	row "python asyncio, tol $tol" 5000 "$T/w" 0 "${ceiling[asyncio]}"
	witness_run "$T/w" "$B/sluice" run -c "$T/t.ini" -- bash -c "$(declare -f node_client); PORT=$PORT node_client $n"
	row "node, tol $tol" 5000 "$T/w" 0 "${ceiling[node]}"
	echo "meter = requests" >>"$T/t.ini"
	WITNESS_WHAT=request witness_run "$T/w" "$B/sluice" run -c "$T/t.ini" -- \
		bash -c "$(declare -f stop_after python_clients requests_client); PORT=$PORT requests_client $n $((SECS + 1))"
	row "requests, tol $tol" 5000 "$T/w" 1
	cell_config t 100
	echo "tolerance = $tol" >>"$T/t.ini"
	witness_run "$T/w" "$B/sluice" run --seccomp -c "$T/t.ini" -- \
		bash -c "$(declare -f procs); PORT=$PORT procs 8 $(((100 * SECS + 7) / 8)) $B/bench/connect_loop_static"
	row "static --seccomp, tol $tol" 100 "$T/w" 0 "${ceiling[static]}"
done

# Over a veth pair into a network namespace of the bench's own: nginx answers
# there, and the witness watches the namespace's end of the pair.  On loopback a
# connect() carries the whole handshake (the SYN is answered inside the call, and
# a release counts from the call's end at 20/s and slower, or from its end less
# 0.2 ms when the call ran longer: docs/design.md, "Where the bound is kept"); the
# line before the rows says how long the call itself takes on each path here.
VNS=sluice-bench-$$
VA=slb$$a
VB=slb$$b
VNET=10.199.$(($$ % 250))
trap 'cleanup; ip link del "$VA" 2>/dev/null; ip netns del "$VNS" 2>/dev/null' EXIT
ip netns add "$VNS" && ip link add "$VA" type veth peer name "$VB" && ip link set "$VB" netns "$VNS" &&
	ip addr add "$VNET.1/24" dev "$VA" && ip link set "$VA" up &&
	ip netns exec "$VNS" ip addr add "$VNET.2/24" dev "$VB" && ip netns exec "$VNS" ip link set "$VB" up &&
	ip netns exec "$VNS" ip link set lo up || fail "no network namespace and veth pair (needs root and iproute2)"
mkdir -p "$T/vnginx"
nginx_conf "$T/vnginx" >"$T/vnginx/nginx.conf" <<EOF
	server {
		listen $VNET.2:$PORT backlog=8192;
		location / { return 200 "ok\n"; }
	}
EOF
ip netns exec "$VNS" "$NGINX" -c "$T/vnginx/nginx.conf" -e "$T/vnginx/error.log" &
BG_PIDS+=($!)
for _ in $(seq 50); do curl -s -o /dev/null "http://$VNET.2:$PORT/" && break; sleep 0.1; done
python3 - "$VNET.2" "$PORT" <<'PY'
import socket, sys, time
def call_us(host, port, n=400):
    took = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        t = time.perf_counter_ns()
        try:
            s.connect((host, port))
        except BlockingIOError:
            pass
        took.append((time.perf_counter_ns() - t) / 1e3)
        s.close()
        time.sleep(0.002)
    took.sort()
    return took[n // 2], took[n * 99 // 100]
lo, veth = call_us("127.0.0.1", int(sys.argv[2])), call_us(sys.argv[1], int(sys.argv[2]))
print("   a non-blocking connect() call, 400 of them: loopback p50 %.0f us, p99 %.0f us; "
      "veth p50 %.0f us, p99 %.0f us" % (lo + veth))
PY
for rate in $RATES; do
	n=$((rate * SECS))
	[ "$n" -lt 40 ] && n=40
	each=$(((n + 7) / 8))
	cell_config v "$rate"
	sed -i "s/^match = .*/match = $VNET.2:$PORT/" "$T/v.ini"
	WITNESS_NETNS=$VNS WITNESS_IF=$VB witness_run "$T/w" "$B/sluice" run -c "$T/v.ini" -- \
		bash -c "$(declare -f procs); DEST=$VNET.2 PORT=$PORT procs 8 $each $B/bench/connect_loop"
	row "C, 8 processes, veth" "$rate" "$T/w"
	WITNESS_NETNS=$VNS WITNESS_IF=$VB witness_run "$T/w" "$B/sluice" run --seccomp -c "$T/v.ini" -- \
		bash -c "$(declare -f procs); DEST=$VNET.2 PORT=$PORT procs 8 $each $B/bench/connect_loop_static"
	row "static --seccomp, veth" "$rate" "$T/w"
done

# A fleet of three daemons sharing each rate through a Redis of the bench's own,
# and a keyed section of the same fleet (one queue per address) whose one
# endpoint all three machines send to.
start_redis
for rate in $RATES; do
	n=$((rate * SECS))
	[ "$n" -lt 40 ] && n=40
	for m in 1 2 3; do
		fleet_config "$m" "$T/m$m-$rate.ini" <<EOF
[dest]
match = 127.0.1.0/24:$PORT
rate = $rate/s
scope = fleet
max_wait = 10m

[keyed]
match = 127.0.2.1:$PORT
per = address
rate = $rate/s
scope = fleet
max_wait = 10m
EOF
		sed -i -e 's/^log_level = debug$/log_level = warning/' -e "s/^fleet = t\(.*\)/fleet = d$rate\1/" \
			"$T/m$m-$rate.ini"
		cp "$T/m$m-$rate.ini" "$T/m$m.ini"
		start_machine "$m"
	done
	sleep 3 # Redis's settling, then each machine's share
	# Every machine's clients run to one deadline, each with the whole cell to
	# send, so all three queues stand to the end: with counts instead, the machine
	# that finishes last runs alone at its third until the leases move its way,
	# and the cell would measure that step (make bench item 14 times it) rather
	# than what a standing fleet delivers.
	fleet_clients() { # fleet_clients [ADDR]: 4 processes a machine, to 127.0.1.M or ADDR
		local m i pids=()
		for m in 1 2 3; do
			for i in 1 2 3 4; do
				LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$T/${SHM_NAME#/}-$m.segment" "$B/bench/connect_loop" "${1:-127.0.1.$m}" \
					"$PORT" "$n" >/dev/null &
				pids+=($!)
			done
		done
		stop_after $((SECS + 1)) "${pids[@]}"
	}
	witness_run "$T/w" fleet_clients
	# From its second second: each machine starts with its own burst of one, the
	# fleet's documented excess at the start (docs/design.md, "Across machines").
	row "fleet of 3 daemons" "$rate" "$T/w" 1
	sleep 1 # the keyed item is leased once it is used: a period, then its shares
	witness_run "$T/w" fleet_clients 127.0.2.1
	row "fleet of 3, keyed" "$rate" "$T/w" 1
	for m in 1 2 3; do eval "kill \$M_PID_$m"; done
	sleep 0.5
done

for q in 100 1000; do
	eval "proxy=\$PROXY_$q"
	witness_run "$T/w" python3 "$ROOT/bench/http_flood.py" 127.0.0.1 "$proxy" $((q * SECS)) --concurrency 64
	row "nginx limit_req (ref.)" "$q" "$T/w"
done
