#!/usr/bin/env bash
# make bench: print sluice's figures.  Numbers, not pass/fail: these machines are
# small and noisy, so each figure is the median of several runs.
#   1. one admission (match + reserve + release in the segment), 1 and 2 processes,
#      and in a keyed section with 1,000 and 100,000 keys in use, beside the floor;
#      the bytes of a key's record;
#   2. the shim's cost on a connect+close loop, unmatched and matched-but-unlimited,
#      as a ratio to the same loop without the shim;
#   3. the shim's cost on write+read of an unmatched TCP socket, and (3b) on
#      sendto+recv of an unmatched datagram while some section meters datagrams;
#      (3c) on a system call made by number that the shim does not route;
#   4. release error at 100/s with 4 processes: how late each release was after its
#      slot (p50/p99/max, microseconds), and the achieved rate;
#   5. event-loop latency of an unheld socket while other requests are held;
#   6. each strategy under a standing backlog: achieved rate, busiest span, and
#      per whole window for the window strategies;
#   7. how long a freed concurrency place takes to reach the next waiter;
#   8. meter = bytes against trickle: achieved vs configured rate for the same
#      uploads, beside each upload unshaped (blocking writes at four rates, one
#      20 MB write, a non-blocking epoll sender with its CPU time, python3, four
#      processes sharing a limit);
#   9. deferred connects as the destination sees them: 400 non-blocking connects
#      at once at 200/s (asyncio and node), kernel SYN timestamps at the server:
#      achieved rate, the most SYNs in any one second, how late the last one was;
#  10. an idle process's memory (RSS and PSS) shaped against unshaped; (10b) what
#      10,000 sockets cost in RSS, followed and waiting, shaped against unshaped;
#  11. node opening 10,000 connections at once, unshaped and shaped at 2000/s:
#      achieved rate, the event loop's worst stall, and the rate at the
#      destination (kernel SYN times);
#  12. what one epoll_wait costs a process holding 10,000 connections with records
#      (meter = requests), against none and against no shim;
#  13. what finding the sections that apply costs at 10, 1,000 and 10,000 sections
#      (the match index), for a destination one applies to and for one none does;
#  14. one rate across three daemons through Redis (bench/fleet.sh): lease calls
#      per second per daemon at 100/s and 10,000/s, the aggregate rate's error, the
#      time to rebalance after a demand step, admission cost shared against local;
#  15. reading the destination's answers (signals = on): cost per answer and per
#      body read, and a 1 GiB download's wall time;
#  16. pictures: arrivals against the schedule for the demo and for four programs
#      sharing one queue (bench/pictures.sh, gnuplot), written to build/bench/;
#  17. a static program under `sluice run --seccomp`: what one trapped connect
#      costs (unmatched: let go; matched, unlimited: reserved and made by the
#      supervisor) against the same connect untrapped;
#  18. the delivered table (bench/delivered.sh): each kind of client at 10, 100,
#      1,000 and 5,000/s under a standing queue - delivered against configured,
#      the smallest gap at the destination, how far behind schedule - beside
#      nginx's limit_req at 100 and 1,000/s; blocking and static clients again
#      over a veth pair into a network namespace of its own;
#  19. HTTP/2 followed request by request (meter = requests, signals = on): what
#      each frame written and read costs (callgrind's instructions, and time), and
#      a 1 GiB download over h2c (nghttpd, curl) against no shim;
#  20. a fleet at size (bench/fleet_scale.sh): 50 and 100 daemons on this machine
#      sharing 100/s, each client offering 10/s, and 200 with the demand moving
#      among them every second: delivered, the most in any one-second span, the
#      fewest in a whole second, Redis's calls, CPU and cost per call; the same
#      demand shapes (one waiter a machine, demand moving every second, a tenth
#      of the machines busy beside light ones) with claims and with ranks
#      alone, beside a per-request Redis GCRA and
#      unshaped; and the lease script's cost a call at
#      100, 1,000 and 10,000 machines on one item (bench/lease_cost.sh);
#  21. a program's attach to the machine's segment through its socket (a
#      sluiced's keeper): the round trip with the memfd, the map and the header's
#      check, p50/p99/largest of 1,000 (bench/attach_cost.c).
#  22. real clients the shim once missed (bench/clients.sh), at 20/s: perl LWP
#      with keep-alive under meter = requests, PHP's curl_exec, getent through
#      glibc's resolver under --seccomp - delivered and the smallest gap; and
#      aiohttp and node fetch at 500/s, their SYNs and their first writes; node
#      http2 with 200 POSTs at 40/s, each request begun and whole at the server.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# The figures only: `sluice run` saying its held calls (docs/commands.md, "When a call is
# held") would come between them.
export SLUICE_QUIET=1
# Debian's programs first, as scripts/deps.sh installs them (tests/integration/lib.sh).
export PATH="/usr/bin:/bin:/usr/sbin:/sbin${PATH:+:$PATH}"
B=$(cd "$ROOT/${BUILD:-build}" && pwd)
T=$(mktemp -d /tmp/sluice-bench.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
# Every program the figures come from, or no figures: a missing one printed blanks.
for p in admit_bench attach_cost connect_loop write_loop sendto_loop syscall_loop hold_open epoll_cost upload answer_loop socket_memory; do
	[ -x "$B/bench/$p" ] || { echo "bench: $B/bench/$p is missing (make bench builds it)" >&2; exit 1; }
done

# wait_port FILE: the port a helper wrote to FILE (10 s at most).
wait_port() {
	for _ in $(seq 100); do [ -s "$1" ] && break; sleep 0.1; done
	cat "$1"
}
# witness_start PORT FILE: the destination's record of SYNs to PORT, appended to
# FILE (helpers/syn_witness.py), once it is capturing; WITNESS is its pid.
# witness_stop: the SYNs still in flight counted, then the witness ended.
witness_start() {
	: >"$2"
	rm -f "$2.ready"
	python3 "$ROOT/tests/integration/helpers/syn_witness.py" --port "$1" --out "$2" \
		--ready-file "$2.ready" --lifetime 120 &
	WITNESS=$!
	for _ in $(seq 100); do [ -s "$2.ready" ] && break; sleep 0.1; done
}
witness_stop() {
	sleep 0.3
	kill "$WITNESS" 2>/dev/null
	wait "$WITNESS" 2>/dev/null || true
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
repeat() { local n=$1; shift; for _ in $(seq "$n"); do "$@"; done | median; }

echo "sluice bench ($(nproc) cores, $(uname -r))"
echo
echo "1. admission cost (match + reserve + release in the shared segment)"
printf '   %-34s %6s ns\n' "uncontended, 1 process:" "$(repeat 5 "$B/bench/admit_bench" 1 1000000)"
printf '   %-34s %6s ns\n' "2 processes contending:" "$(repeat 5 "$B/bench/admit_bench" 2 500000)"
# Keyed (per = address): each admission to one of KEYS keys, scattered; beside it
# the floor of the same run, one clock read and one uncontended compare-and-swap.
for keys in 1000 100000; do
	read -r cost hot floor used < <("$B/bench/admit_bench" keyed "$keys" 1000000)
	printf '   %-34s %6s ns  (floor %s ns: %sx; %s keys in use)\n' "keyed, $keys keys, scattered:" "$cost" \
		"$floor" "$(awk -v c="$cost" -v f="$floor" 'BEGIN { printf "%.0f", c / f }')" "$used"
	printf '   %-34s %6s ns  (%sx the floor)\n' "keyed, $keys keys, one key:" "$hot" \
		"$(awk -v c="$hot" -v f="$floor" 'BEGIN { printf "%.1f", c / f }')"
done

# Durable quotas (docs/shaping.md, "Quotas"): the admission of a durable fixed window
# against a plain one, and a save of 100,000 keys (snapshot, write, fsync, rename).
read -r plain durable save_ms save_bytes < <("$B/bench/admit_bench" quota "$T" 1000000)
printf '   %-34s %6s ns  (a plain one: %s ns)\n' "durable quota section:" "$durable" "$plain"
printf '   %-34s %6s ms  (a file of %s MB, fsynced)\n' "a save of 100,000 quota keys:" "$save_ms" \
	"$(awk -v b="$save_bytes" 'BEGIN { printf "%.1f", b / 1e6 }')"

read -r keyrec keyslot morerec moreslot < <("$B/bench/admit_bench" sizes)
printf '   %-34s %6s B   (%s B of segment per key slot)\n' "a key's record:" "$keyrec" "$keyslot"
printf '   %-34s %6s B   (%s B per key slot: sliding window, fleet or adapt)\n' "a key's record, with its more:" \
	"$morerec" "$moreslot"

python3 "$ROOT/tests/integration/helpers/sink.py" "$T/port" 600 &
python3 "$ROOT/tests/integration/helpers/server.py" --port-file "$T/hport" --lifetime 600 &
port=$(wait_port "$T/port")
hport=$(wait_port "$T/hport")
other=$((port == 65535 ? port - 1 : port + 1))
# config NAME: a config file whose [sluice] part is private to this run, then stdin.
config() {
	printf '[sluice]\nshm_name = /sluice-bench-%s-%d\ncontrol_socket = %s/%s.sock\n' "$1" $$ "$T" "$1"
	cat
}
# Both shimmed loops use the shim's own private segment (fallback = local): the
# hot path is the same code, and no daemon has to be started.  The loops connect to
# a port where nothing listens, so each connect is refused by the kernel within a
# few microseconds and the shim's share is not lost in handshake noise; the runs
# alternate (plain, unmatched, matched) so drift hits all three alike.
N=20000
loop() { "$B/bench/connect_loop" 127.0.0.1 "$closed" "$N" refused; }
closed=$other
config unmatched >"$T/bench.ini" <<EOF
[elsewhere]
match = 127.0.0.1:$port, *.example.com
rate = 1/s
EOF
config unlimited >"$T/unlimited.ini" <<EOF
[unlimited]
match = 127.0.0.1:$closed
rate = 1000000000/s
burst = 1000000000
EOF
for _ in 1 2 3 4 5 6 7; do
	loop >>"$T/plain"
	LD_PRELOAD="$B/libsluice.so" SLUICE_CONFIG="$T/bench.ini" loop >>"$T/unmatched"
	LD_PRELOAD="$B/libsluice.so" SLUICE_CONFIG="$T/unlimited.ini" loop >>"$T/matched"
done
plain=$(median <"$T/plain") unmatched=$(median <"$T/unmatched") matched=$(median <"$T/matched")
echo
echo "2. shim overhead on a refused connect + close ($N per run, median of 7)"
printf '   %-34s %6s ns per connect+close\n' "no shim:" "$plain"
printf '   %-34s %6s ns   ratio %s\n' "shim, unmatched destination:" "$unmatched" \
	"$(awk -v a="$unmatched" -v b="$plain" 'BEGIN { printf "%.3f", a / b }')"
printf '   %-34s %6s ns   ratio %s\n' "shim, matched but unlimited:" "$matched" \
	"$(awk -v a="$matched" -v b="$plain" 'BEGIN { printf "%.3f", a / b }')"
# Wall-clock ratios move with the kernel's mood; instructions do not.  callgrind
# counts the user-space instructions one more connect costs, with and without.
if command -v valgrind >/dev/null; then
	instr() { # N ENV... -> instructions of N refused connects
		local n=$1
		shift
		env "$@" valgrind --tool=callgrind --callgrind-out-file="$T/cg.out" \
			"$B/bench/connect_loop" 127.0.0.1 "$closed" "$n" refused 2>&1 >/dev/null |
			awk '/Collected/ { print $NF }'
	}
	per() { echo $((($(instr 2000 "$@") - $(instr 1000 "$@")) / 1000)); }
	i_plain=$(per) i_unmatched=$(per LD_PRELOAD="$B/libsluice.so" SLUICE_CONFIG="$T/bench.ini")
	i_matched=$(per LD_PRELOAD="$B/libsluice.so" SLUICE_CONFIG="$T/unlimited.ini")
	printf '   user-space instructions per connect+close (callgrind): %s plain, +%s unmatched, +%s matched\n' \
		"$i_plain" $((i_unmatched - i_plain)) $((i_matched - i_plain))
fi

echo
echo "3. shim overhead on write+read of an unmatched TCP socket (64 bytes, median of 7)"
for _ in 1 2 3 4 5 6 7; do
	"$B/bench/write_loop" 200000 >>"$T/w.plain"
	LD_PRELOAD="$B/libsluice.so" SLUICE_CONFIG="$T/bench.ini" "$B/bench/write_loop" 200000 >>"$T/w.shim"
done
wp=$(median <"$T/w.plain") ws=$(median <"$T/w.shim")
printf '   %-34s %6s ns per round\n' "no shim:" "$wp"
printf '   %-34s %6s ns   ratio %s\n' "shim:" "$ws" "$(awk -v a="$ws" -v b="$wp" 'BEGIN { printf "%.3f", a / b }')"
if command -v valgrind >/dev/null; then
	winstr() { # N ENV... -> instructions of N rounds
		local n=$1
		shift
		env "$@" valgrind --tool=callgrind --callgrind-out-file="$T/cg.w" "$B/bench/write_loop" "$n" \
			2>&1 >/dev/null | awk '/Collected/ { print $NF }'
	}
	wper() { echo $((($(winstr 2000 "$@") - $(winstr 1000 "$@")) / 1000)); }
	w_plain=$(wper) w_shim=$(wper LD_PRELOAD="$B/libsluice.so" SLUICE_CONFIG="$T/bench.ini")
	printf '   user-space instructions per round (callgrind): %s plain, +%s with the shim\n' \
		"$w_plain" $((w_shim - w_plain))
fi

echo
echo "3b. shim overhead on sendto+recv of an unmatched UDP datagram (64 bytes, median of 7)"
config udp >"$T/udp.ini" <<EOF
[datagrams-elsewhere]
match = 127.0.0.1:$port, 192.0.2.0/24, *.example.com
meter = datagrams
rate = 1/s
EOF
for _ in 1 2 3 4 5 6 7; do
	"$B/bench/sendto_loop" 200000 >>"$T/u.plain"
	LD_PRELOAD="$B/libsluice.so" SLUICE_CONFIG="$T/udp.ini" "$B/bench/sendto_loop" 200000 >>"$T/u.shim"
done
up=$(median <"$T/u.plain") us=$(median <"$T/u.shim")
printf '   %-34s %6s ns per round\n' "no shim:" "$up"
printf '   %-34s %6s ns   ratio %s\n' "shim (datagram section elsewhere):" "$us" \
	"$(awk -v a="$us" -v b="$up" 'BEGIN { printf "%.3f", a / b }')"
if command -v valgrind >/dev/null; then
	uinstr() { # N ENV... -> instructions of N rounds
		local n=$1
		shift
		env "$@" valgrind --tool=callgrind --callgrind-out-file="$T/cg.u" "$B/bench/sendto_loop" "$n" \
			2>&1 >/dev/null | awk '/Collected/ { print $NF }'
	}
	uper() { echo $((($(uinstr 2000 "$@") - $(uinstr 1000 "$@")) / 1000)); }
	u_plain=$(uper) u_shim=$(uper LD_PRELOAD="$B/libsluice.so" SLUICE_CONFIG="$T/udp.ini")
	printf '   user-space instructions per round (callgrind): %s plain, +%s with the shim\n' \
		"$u_plain" $((u_shim - u_plain))
fi

echo
echo "3c. shim overhead on syscall(SYS_getppid), a number it does not route (median of 7)"
for _ in 1 2 3 4 5 6 7; do
	"$B/bench/syscall_loop" 1000000 >>"$T/s.plain"
	LD_PRELOAD="$B/libsluice.so" SLUICE_CONFIG="$T/bench.ini" "$B/bench/syscall_loop" 1000000 >>"$T/s.shim"
done
sp=$(median <"$T/s.plain") ss=$(median <"$T/s.shim")
printf '   %-34s %6s ns per call\n' "no shim:" "$sp"
printf '   %-34s %6s ns   ratio %s\n' "shim:" "$ss" "$(awk -v a="$ss" -v b="$sp" 'BEGIN { printf "%.3f", a / b }')"

config rate >"$T/rate.ini" <<EOF
[hundred]
match = 127.0.0.1:$port
rate = 100/s
max_wait = 1m
EOF
SLUICE_DEBUG=1 SLUICE_LOG="$T/rate.log" "$B/sluice" run -c "$T/rate.ini" -- bash -c '
	for p in 1 2 3 4; do "$1" 127.0.0.1 "$2" 200 >/dev/null & done; wait' _ "$B/bench/connect_loop" "$port"
echo
echo "4. release error at 100/s, 4 processes x 200 connections"
python3 - "$T/rate.log" <<'PY'
import re, sys
late, rel = [], []
for line in open(sys.argv[1]):
    m = re.search(r"slot=(\d+) released=(\d+)", line)
    if m:
        slot, r = int(m.group(1)), int(m.group(2))
        late.append((r - slot) / 1e3)
        rel.append(r)
late.sort(); rel.sort()
q = lambda p: late[min(len(late) - 1, int(p * len(late)))]
gaps = [(b - a) / 1e6 for a, b in zip(rel, rel[1:])]
print("   late after slot: p50 %.0f us, p99 %.0f us, max %.0f us (%d releases)" % (q(0.5), q(0.99), late[-1], len(late)))
print("   achieved rate %.2f/s (configured 100/s); closest two releases %.3f ms apart (interval 10 ms)"
      % ((len(rel) - 1) / ((rel[-1] - rel[0]) / 1e9), min(gaps)))
PY

echo
echo "5. event loop: an unheld socket's round trips while 30 requests wait (10/s)"
config loop >"$T/loop.ini" <<EOF
[held]
match = 127.0.0.1:$hport
rate = 10/s
EOF
"$B/sluice" run -c "$T/loop.ini" -- python3 "$ROOT/bench/eventloop.py" "$hport" 30

echo
echo "6. each strategy under a standing backlog: 4 processes connecting as fast as allowed"
python3 "$ROOT/tests/integration/helpers/sink.py" "$T/cport" 600 hold &
cport=$(wait_port "$T/cport")
for strat in leaky-bucket token-bucket fixed-window sliding-window session-window; do
	config "s-$strat" >"$T/s-$strat.ini" <<EOF
[$strat]
match = 127.0.0.1:$port
rate = 20/1s
strategy = $strat
max_wait = 1m
EOF
	SLUICE_DEBUG=1 SLUICE_LOG="$T/s-$strat.log" "$B/sluice" run -c "$T/s-$strat.ini" -- bash -c '
		for p in 1 2 3 4; do "$1" 127.0.0.1 "$2" 25 >/dev/null & done; wait' _ "$B/bench/connect_loop" "$port"
	python3 - "$T/s-$strat.log" "$strat" <<'PY'
import re, sys, time
rel = sorted(int(m.group(1)) for m in re.finditer(r"released=(\d+)", open(sys.argv[1]).read()))
off = time.time_ns() - time.monotonic_ns()
w = 1_000_000_000
# Whole windows only: the first and last may be partial (the run starts and ends
# inside them).
if sys.argv[2] == "fixed-window":
    per = {}
    for r in rel:
        per[(r + off) // w] = per.get((r + off) // w, 0) + 1
    whole = [per[k] for k in sorted(per)[1:-1]]
elif sys.argv[2] == "session-window":
    whole, i = [], 0
    while i < len(rel):
        j = i
        while j < len(rel) and rel[j] < rel[i] + w:
            j += 1
        whole.append(j - i); i = j
    whole = whole[:-1]
else:
    spans = [sum(1 for x in rel if r <= x < r + w) for r in rel if r + w <= rel[-1]]
    whole = [max(spans)] if spans else []
rate = (len(rel) - 1) / ((rel[-1] - rel[0]) / 1e9)
busiest = max(sum(1 for x in rel if r - w < x <= r) for r in rel)
print("   %-15s %3d releases, %6.2f/s overall (configured 20/s); busiest 1 s span: %d%s"
      % (sys.argv[2], len(rel), rate, busiest,
         "; per whole window: %s" % whole if sys.argv[2] in ("fixed-window", "session-window") else ""))
PY
done

echo
echo "7. concurrency: how long a freed place takes to reach the next waiter (concurrency = 1)"
config conc >"$T/conc.ini" <<EOF
[one]
match = 127.0.0.1:$cport
concurrency = 1
max_wait = 1m
EOF
printf '   '
"$B/sluice" run -c "$T/conc.ini" -- python3 "$ROOT/tests/integration/helpers/handover.py" "$cport" 50 0.01

echo
echo "8. meter = bytes against trickle (the nearest preload shaper), same uploads, same sink"
if ! command -v trickle >/dev/null; then
	echo "   trickle not installed: skipped"
	exit 0
fi
python3 "$ROOT/tests/integration/helpers/sink.py" "$T/uport" 900 hold &
uport=$(wait_port "$T/uport")
up="$B/bench/upload"
# bytes_ini RATE_TEXT: a config with one bytes section at that rate.
bytes_ini() {
	config "bytes-$1" <<EOF
[upload]
match = 127.0.0.1:$uport
meter = bytes
rate = $1/s
max_wait = 10m
EOF
}
# row LABEL RATE_KIB TOTAL CMD...: the upload under sluice, then under trickle, and
# last unshaped: what this machine's loopback and sink carry at all, the ceiling
# no shaper can pass (a rate above it measures the machine, not the shaper).
row() {
	local label=$1 kib=$2 total=$3
	shift 3
	bytes_ini "${kib}K" >"$T/row.ini"
	s=$("$B/sluice" run -c "$T/row.ini" -- "$@" 2>/dev/null | tail -1)
	t=$(trickle -s -u "$kib" "$@" 2>/dev/null | tail -1)
	u=$("$@" 2>/dev/null | tail -1)
	python3 - "$label" "$kib" "$s" "$t" "$u" <<'PY'
import sys
label, kib, s, t = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
u = sys.argv[5].split()
want = kib * 1024
def cell(r):
    if len(r) < 2:
        return "%-26s" % "failed"
    rate = float(r[0]) / float(r[1])
    return "%8.0f KiB/s %+7.2f%%%s" % (rate / 1024, 100 * (rate / want - 1),
                                        " cpu %.2fs" % float(r[2]) if label.startswith("non-blocking") else "")
print("   %-34s %8d KiB/s | sluice %s | trickle %s | unshaped %s" % (label, kib, cell(s), cell(t),
      "%.0f KiB/s" % (float(u[0]) / float(u[1]) / 1024) if len(u) >= 2 else "failed"))
PY
}
row "blocking 64 KiB writes" 100 $((250 * 1024)) "$up" 127.0.0.1 "$uport" $((250 * 1024)) 65536 block
row "blocking 64 KiB writes" 1024 $((2560 * 1024)) "$up" 127.0.0.1 "$uport" $((2560 * 1024)) 65536 block
row "blocking 64 KiB writes" 10240 $((25600 * 1024)) "$up" 127.0.0.1 "$uport" $((25600 * 1024)) 65536 block
row "blocking 64 KiB writes" 102400 $((256000 * 1024)) "$up" 127.0.0.1 "$uport" $((256000 * 1024)) 65536 block
row "blocking 64 KiB writes" 1048576 $((2560 * 1024 * 1024)) "$up" 127.0.0.1 "$uport" $((2560 * 1024 * 1024)) 65536 block
row "non-blocking on epoll" 102400 $((256000 * 1024)) "$up" 127.0.0.1 "$uport" $((256000 * 1024)) 65536 epoll
row "one single 20 MB write" 10240 20000000 "$up" 127.0.0.1 "$uport" 20000000 20000000 single
row "non-blocking on epoll" 1024 $((2560 * 1024)) "$up" 127.0.0.1 "$uport" $((2560 * 1024)) 65536 epoll
cat >"$T/pysend.py" <<'PY'
import socket, sys, time
port, total = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
chunk, t = b"x" * 65536, time.monotonic()
for i in range(0, total, 65536):
    s.sendall(chunk[:min(65536, total - i)])
print(total, time.monotonic() - t, 0)
PY
row "python3 sendall, 64 KiB" 1024 $((2560 * 1024)) /usr/bin/python3 "$T/pysend.py" "$uport" $((2560 * 1024))
# Four processes sharing one limit: the total rate is what the destination sees.
cat >"$T/four.sh" <<'SH'
# Four uploads at once; the rate is all their bytes over first write to last done.
up=$1 port=$2 each=$3 out=$(mktemp)
for i in 1 2 3 4; do "$up" 127.0.0.1 "$port" "$each" 65536 block >>"$out" & done
wait
awk '{ b += $1; if (!s || $4 < s) s = $4; if ($5 > e) e = $5 } END { print b, (e - s) / 1e9, 0 }' "$out"
rm -f "$out"
SH
row "4 processes sharing one limit" 1024 $((2560 * 1024)) sh "$T/four.sh" "$up" "$uport" $((640 * 1024))

echo
echo "9. deferred connects at the destination: 400 non-blocking connects at once, 200/s"
python3 "$ROOT/tests/integration/helpers/server.py" --port-file "$T/dport" --lifetime 600 &
dport=$(wait_port "$T/dport")
config deferred >"$T/deferred.ini" <<EOF
[two-hundred]
match = 127.0.0.1:$dport
rate = 200/s
max_wait = 1m
EOF
deferred_row() { # LABEL CMD...: one run, witnessed at the destination
	local label=$1
	shift
	witness_start "$dport" "$T/syn.log"
	"$B/sluice" run -c "$T/deferred.ini" -- "$@" >/dev/null
	witness_stop
	python3 - "$T/syn.log" "$label" <<'PY'
import bisect, sys
t = sorted(int(l.split()[0]) for l in open(sys.argv[1]))
span = (t[-1] - t[0]) / 1e9
busiest = max(bisect.bisect_right(t, x + 10**9 - 1) - i for i, x in enumerate(t))
late = span - (len(t) - 1) / 200
gaps = [(b - a) / 1e6 for a, b in zip(t, t[1:])]
print("   %-8s %d SYNs, %.2f/s; most in any 1 s: %d (limit 201); smallest gap %.3f ms; "
      "last %.1f ms behind the schedule" % (sys.argv[2], len(t), (len(t) - 1) / span, busiest, min(gaps), late * 1000))
PY
}
deferred_row asyncio /usr/bin/python3 -c '
import asyncio, sys
async def one(i):
    r, w = await asyncio.open_connection("127.0.0.1", int(sys.argv[1]))
    w.write(b"GET /d%d HTTP/1.0\r\n\r\n" % i); await w.drain(); await r.read(); w.close()
async def main():
    await asyncio.gather(*(one(i) for i in range(400)))
asyncio.run(main())' "$dport"
deferred_row node node -e '
const h = require("http"); let left = 400;
for (let i = 0; i < 400; i++)
	h.get({host: "127.0.0.1", port: +process.argv[1], path: "/n" + i, agent: false}, r => {
		r.resume(); r.on("end", () => { if (--left === 0) process.exit(0); }); });' "$dport"

echo
echo "10. memory of an idle process: shaped (attached, one section) against unshaped"
mem_of() { # PREFIX... -> "RSS_KB PSS_KB" of an idle `sleep` started by PREFIX
	"$@" sleep 6 &
	local starter=$! p
	sleep 1.5
	# env execs sleep itself; sluice run starts it as its child.
	p=$(pgrep -P "$starter" -x sleep || echo "$starter")
	awk '/^VmRSS/ { r = $2 } END { printf "%d ", r }' "/proc/$p/status"
	awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup"
	kill "$p" 2>/dev/null
	wait "$starter" 2>/dev/null
}
read -r prss ppss <<<"$(mem_of env)"
read -r srss spss <<<"$(mem_of "$B/sluice" run -c "$T/deferred.ini" --)"
printf '   %-34s %6s KB RSS, %6s KB PSS\n' "unshaped:" "$prss" "$ppss"
printf '   %-34s %6s KB RSS, %6s KB PSS   (+%d KB RSS, +%d KB PSS)\n' "shaped:" "$srss" "$spss" \
	$((srss - prss)) $((spss - ppss))

echo
echo "10b. what a shaped socket costs: 10,000 sockets in one process, RSS shaped against unshaped"
# bench/socket_memory opens them and prints VmRSS before and after; the kernel's own
# socket memory is not in RSS, so the difference is what the shim keeps per socket.
# One server for the config's port, started afresh for each run: a server still
# closing the last run's 10,000 would run out of descriptors.
kport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$T/mem.ini" <<INI
[sluice]
shm_name = /sluice-bench-mem-$$
control_socket = $T/mem.sock

[follow]
match = 127.0.0.1:$kport
meter = requests
rate = 1000000/s
INI
sed -e 's/^\[follow\]/[wait]/' -e 's|^rate = .*|rate = 1/m\nmax_wait = forever|' -e 's/^meter = .*//' \
	-e "s/mem-$$/memw-$$/" -e "s|mem.sock|memw.sock|" "$T/mem.ini" >"$T/memw.ini"
per_socket() { # MODE PREFIX...: bytes of RSS per socket for 10,000 sockets
	local mode=$1 before after
	shift
	rm -f "$T/kport"
	(ulimit -n 12000; exec python3 "$ROOT/bench/keepalive_server.py" "$T/kport" "$kport") &
	local server=$!
	wait_port "$T/kport" >/dev/null
	read -r before after < <(ulimit -n 12000; "$@" "$B/bench/socket_memory" "$kport" 10000 "$mode")
	kill "$server" 2>/dev/null
	wait "$server" 2>/dev/null || true
	echo $(((after - before) * 1024 / 10000))
}
uf=$(per_socket follow env)
sf=$(per_socket follow "$B/sluice" run -c "$T/mem.ini" --)
uw=$(per_socket wait env)
sw=$(per_socket wait "$B/sluice" run -c "$T/memw.ini" --)
printf '   %-34s %6s B a socket unshaped, %6s B shaped  (+%d B)\n' "followed (requests, answers read):" \
	"$uf" "$sf" $((sf - uf))
printf '   %-34s %6s B a socket unshaped, %6s B shaped  (+%d B)\n' "waiting (deferred connects):" \
	"$uw" "$sw" $((sw - uw))

echo
echo "11. node, 10,000 connections at once to a destination shaped at 2000/s"
cat >"$T/many.ini" <<INI
[sluice]
shm_name = /sluice-bench-many-$$
control_socket = $T/many.sock

[many]
match = 127.0.0.1:$port
rate = 2000/s
max_wait = 1m
INI
# many_row LABEL CMD...: many_connections.js under CMD - its own rate (all 10,000
# over the whole run, the loop's start included) and worst stall - and the rate
# at the destination: kernel SYN times, first to last, against the 2000/s asked.
many_row() {
	local label=$1
	shift
	witness_start "$port" "$T/many.syn"
	"$@" node "$ROOT/tests/integration/helpers/many_connections.js" "$port" 10000 >"$T/many.out"
	witness_stop
	python3 - "$T/many.syn" "$T/many.out" "$label" <<'PY2'
import sys
t = sorted(int(l.split()[0]) for l in open(sys.argv[1]))
f = open(sys.argv[2]).read().split()
dest = (len(t) - 1) / ((t[-1] - t[0]) / 1e9)
share = "" if sys.argv[3].startswith("without") else " (%.2f%% of 2000/s)" % (dest / 20)
print("   %-34s %.0f/s, worst event-loop stall %.0f ms; at the destination %d SYNs, %.1f/s%s"
      % (sys.argv[3], int(f[1]) / float(f[2]), float(f[3]), len(t), dest, share))
PY2
}
(ulimit -n 12000
many_row "without the shim:" env
many_row "shaped at 2000/s:" "$B/sluice" run -c "$T/many.ini" --)

echo
echo "12. epoll_wait(timeout 0) while the process holds 10,000 connections with records"
cat >"$T/epoll.ini" <<INI
[sluice]
shm_name = /sluice-bench-epoll-$$
control_socket = $T/epoll.sock

[per-request]
match = 127.0.0.1:$port
meter = requests
rate = 1000/s
INI
(ulimit -n 12000
printf '   %-34s %6s ns\n' "unshaped, 10,000 connections:" \
	"$(repeat 3 "$B/bench/epoll_cost" "$port" 10000 200000)"
printf '   %-34s %6s ns\n' "shaped, no records:" \
	"$(repeat 3 "$B/sluice" run -c "$T/epoll.ini" -- "$B/bench/epoll_cost" "$port" 0 200000)"
printf '   %-34s %6s ns\n' "shaped, 10,000 records:" \
	"$(repeat 3 "$B/sluice" run -c "$T/epoll.ini" -- "$B/bench/epoll_cost" "$port" 10000 200000)")

echo
echo "13. finding the sections that apply (the match index), 10 patterns a section"
for n in 10 1000 10000; do
	read -r hit miss pats < <("$B/bench/admit_bench" match "$n" 1000000)
	printf '   %-34s %6s ns matched, %s ns unmatched (%s patterns)\n' "$n sections:" "$hit" "$miss" "$pats"
done

echo
echo "14. one rate across three daemons sharing through Redis (scope = fleet)"
command -v redis-server >/dev/null || { echo "bench: redis-server is missing (scripts/deps.sh installs it)" >&2; exit 1; }
BUILD=${BUILD:-build} bash "$ROOT/bench/fleet.sh" | grep '^   '

echo
echo "15. reading the destination's answers (signals = on) on a shaped connection"
printf '[sluice]\nshm_name = /sluice-bench-answers-%s\ncontrol_socket = %s\n\n[local]\nmatch = 127.0.0.1\nrate = 1000000/s\n' \
	"$$" "$T/answers.sock" >"$T/answers.ini"
{ cat "$T/answers.ini"; echo "signals = off"; } >"$T/answers-off.ini"
under() { SLUICE_LIB="$B/libsluice.so" "$B/sluice" run -c "$@"; }
for _ in 1 2 3 4 5 6 7; do
	"$B/bench/answer_loop" 100000 >>"$T/a.plain"
	under "$T/answers-off.ini" -- "$B/bench/answer_loop" 100000 >>"$T/a.off"
	under "$T/answers.ini" -- "$B/bench/answer_loop" 100000 >>"$T/a.on"
done
ap=$(median <"$T/a.plain") aoff=$(median <"$T/a.off") aon=$(median <"$T/a.on")
printf '   %-34s %6s ns per 64-byte answer written and read\n' "no shim:" "$ap"
printf '   %-34s %6s ns\n' "shaped, signals = off:" "$aoff"
printf '   %-34s %6s ns   (+%s ns to read the answer)\n' "shaped, signals = on:" "$aon" $((aon - aoff))
python3 "$ROOT/bench/big_server.py" "$T/big.port" 1024 &
big=$!
for _ in $(seq 50); do [ -s "$T/big.port" ] && break; sleep 0.1; done
sed -e "s/^match = 127.0.0.1$/match = 127.0.0.1:$(cat "$T/big.port")/" "$T/answers.ini" >"$T/big.ini"
url="http://127.0.0.1:$(cat "$T/big.port")/big"
for _ in $(seq 11); do # alternated: the loopback's noise falls on both alike
	curl -s -o /dev/null -w '%{time_total}\n' "$url" >>"$T/dl.plain"
	under "$T/big.ini" -- curl -s -o /dev/null -w '%{time_total}\n' "$url" >>"$T/dl.on"
done
kill "$big" 2>/dev/null
if command -v valgrind >/dev/null; then
	# The loopback's noise is larger than the cost: count it instead.  What the
	# shim adds to each read of a body, from curl's user-space instructions for
	# 64 MiB less those for 1 MiB (start-up cancels out), against no shim.
	cg() { # MIB ENV... -> curl's instructions for a download of MIB
		local mib=$1 pf="$T/cg$RANDOM.port" pid n
		shift
		python3 "$ROOT/bench/big_server.py" "$pf" "$mib" &
		pid=$!
		for _ in $(seq 50); do [ -s "$pf" ] && break; sleep 0.1; done
		sed -e "s/^match = 127.0.0.1$/match = 127.0.0.1:$(cat "$pf")/" "$T/answers.ini" >"$T/cg.ini"
		n=$(env "$@" valgrind --tool=callgrind --callgrind-out-file="$T/cg.out" \
			curl -s -o /dev/null "http://127.0.0.1:$(cat "$pf")/" 2>&1 | awk '/Collected/ { print $NF }')
		kill "$pid" 2>/dev/null
		echo "$n"
	}
	p64=$(cg 64) p1=$(cg 1) s64=$(cg 64 LD_PRELOAD="$B/libsluice.so" SLUICE_CONFIG="$T/cg.ini") \
		s1=$(cg 1 LD_PRELOAD="$B/libsluice.so" SLUICE_CONFIG="$T/cg.ini")
	python3 "$ROOT/bench/big_server.py" "$T/st.port" 64 &
	big=$!
	for _ in $(seq 50); do [ -s "$T/st.port" ] && break; sleep 0.1; done
	reads=$(strace -f -c -e trace=recvfrom,read curl -s -o /dev/null "http://127.0.0.1:$(cat "$T/st.port")/" 2>&1 |
		awk '$NF == "recvfrom" { print $4 }')
	kill "$big" 2>/dev/null
	printf '   %-34s %6s instructions per read (%s reads for 64 MiB; curl alone: %s a read)\n' \
		"reading a body, shim added:" $(( ((s64 - s1) - (p64 - p1)) / ${reads:-1} )) "$reads" \
		$(( (p64 - p1) / ${reads:-1} ))
fi
dp=$(median <"$T/dl.plain") don=$(median <"$T/dl.on")
printf '   %-34s %6s s (median of 11)\n' "1 GiB with curl, no shim:" "$dp"
printf '   %-34s %6s s   %s\n' "1 GiB, shaped, answers read:" "$don" \
	"$(awk -v a="$don" -v b="$dp" 'BEGIN { printf "%+.1f%% time (target: under 2%% loss)", (a / b - 1) * 100 }')"

echo
echo "16. pictures of arrivals against the schedule (kernel SYN timestamps), in $B/bench/"
"$ROOT/bench/pictures.sh" "$B/bench" | sed 's/^/   /'

echo
echo "17. a static program's connect under sluice run --seccomp (connect+close to a closed port)"
[ -x "$B/bench/connect_loop_static" ] || { echo "bench: $B/bench/connect_loop_static is missing" >&2; exit 1; }
closed17=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
config sc-unmatched >"$T/sc-unmatched.ini" <<EOF
[elsewhere]
match = 127.0.0.1:1
rate = 1/s
EOF
config sc-matched >"$T/sc-matched.ini" <<EOF
[matched]
match = 127.0.0.1:$closed17
rate = 1000000/s
EOF
sc_loop() { "$@" "$B/bench/connect_loop_static" 127.0.0.1 "$closed17" 20000 refused 2>/dev/null; }
splain=$(repeat 5 sc_loop env)
sunm=$(repeat 5 sc_loop "$B/sluice" run --seccomp -c "$T/sc-unmatched.ini" --)
smat=$(repeat 5 sc_loop "$B/sluice" run --seccomp -c "$T/sc-matched.ini" --)
printf '   %-34s %6s ns\n' "untrapped (no filter):" "$splain"
printf '   %-34s %6s ns   (+%s ns a trapped connect)\n' "trapped, unmatched (let go):" "$sunm" $((sunm - splain))
printf '   %-34s %6s ns   (+%s ns)\n' "trapped, matched, unlimited:" "$smat" $((smat - splain))

echo
BUILD=${BUILD:-build} bash "$ROOT/bench/delivered.sh" | grep -v '^  [^ ]'

echo
echo "19. HTTP/2 request by request (meter = requests, signals = on) on a shaped h2c connection"
config h2 >"$T/h2.ini" <<EOF
[local]
match = 127.0.0.1
meter = requests
rate = 1000000/s
EOF
h2p=$(repeat 5 "$B/bench/h2_frames" 100000)
h2s=$(repeat 5 "$B/sluice" run -c "$T/h2.ini" -- "$B/bench/h2_frames" 100000)
printf '   %-34s %6s ns per 64-byte frame written and read\n' "no shim:" "$h2p"
printf '   %-34s %6s ns   (+%s ns a frame)\n' "shaped, followed both ways:" "$h2s" $((h2s - h2p))
if command -v valgrind >/dev/null; then
	h2cg() { # COUNT ENV... -> h2_frames' instructions
		local c=$1
		shift
		env "$@" valgrind --tool=callgrind --callgrind-out-file="$T/h2cg.out" "$B/bench/h2_frames" "$c" 2>&1 |
			awk '/Collected/ { print $NF }'
	}
	shim19="LD_PRELOAD=$B/libsluice.so SLUICE_CONFIG=$T/h2.ini"
	p1=$(h2cg 1000) p2=$(h2cg 21000) s1=$(h2cg 1000 $shim19) s2=$(h2cg 21000 $shim19)
	printf '   %-34s %6s instructions per frame (the program alone: %s)\n' "a frame written or read, shim added:" \
		$(( ((s2 - s1) - (p2 - p1)) / 40000 )) $(( (p2 - p1) / 40000 ))
fi
mkdir -p "$T/h2www" && truncate -s 1G "$T/h2www/big" && truncate -s 64M "$T/h2www/m64" && truncate -s 1M "$T/h2www/m1"
h2port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
nghttpd --no-tls -d "$T/h2www" "$h2port" >/dev/null 2>&1 &
h2srv=$!
for _ in $(seq 50); do curl -s --http2-prior-knowledge -o /dev/null -r 0-0 "http://127.0.0.1:$h2port/big" && break; sleep 0.1; done
for _ in $(seq 11); do # alternated: the loopback's noise falls on both alike
	curl -s --http2-prior-knowledge -o /dev/null -w '%{time_total}\n' "http://127.0.0.1:$h2port/big" >>"$T/h2dl.plain"
	"$B/sluice" run -c "$T/h2.ini" -- curl -s --http2-prior-knowledge -o /dev/null -w '%{time_total}\n' \
		"http://127.0.0.1:$h2port/big" >>"$T/h2dl.on"
done
if command -v valgrind >/dev/null; then
	# As item 15: the loopback's noise is larger than the cost, so count it too -
	# curl's instructions for 64 MiB less those for 1 MiB, with and without.
	h2dl() { # FILE ENV...
		local f=$1
		shift
		env "$@" valgrind --tool=callgrind --callgrind-out-file="$T/h2dl.out" curl -s --http2-prior-knowledge \
			-o /dev/null "http://127.0.0.1:$h2port/$f" 2>&1 | awk '/Collected/ { print $NF }'
	}
	p64=$(h2dl m64) p1=$(h2dl m1) s64=$(h2dl m64 $shim19) s1=$(h2dl m1 $shim19)
	printf '   %-34s %6s instructions added to curl'"'"'s %s for 63 MiB (%s%%)\n' "a download's frames read, shim:" \
		$(( (s64 - s1) - (p64 - p1) )) $(( p64 - p1 )) \
		"$(awk -v a=$(( (s64 - s1) - (p64 - p1) )) -v b=$(( p64 - p1 )) 'BEGIN { printf "%.2f", 100 * a / b }')"
fi
kill "$h2srv" 2>/dev/null
dp=$(median <"$T/h2dl.plain") don=$(median <"$T/h2dl.on")
printf '   %-34s %6s s (median of 11)\n' "1 GiB over h2c, no shim:" "$dp"
printf '   %-34s %6s s   %s\n' "1 GiB over h2c, followed:" "$don" \
	"$(awk -v a="$don" -v b="$dp" 'BEGIN { printf "%+.1f%% time (target: under 2%% loss)", (a / b - 1) * 100 }')"

echo
echo "20. a fleet at size: many daemons on this machine sharing 100/s through one Redis"
for run in "50 20 steady" "100 15 steady" "200 15 steady" "200 15 moving"; do
	set -- $run
	echo "   $1 daemons, $3 demand:"
	BUILD=${BUILD:-build} bash "$ROOT/bench/fleet_scale.sh" "$@" | grep '^   ' | sed 's/^/  /'
done
# Side by side with what a fleet could run instead: one Redis call a request, a
# GCRA script reserving the fleet's next slot (SHAPER=redis-gcra), and the same
# clients unshaped (SHAPER=none), for each demand shape (issue: a fleet that
# delivers what it is given).
echo "   side by side: sluice (claims on, the default), sluice with ranks alone (claims = off), a per-request Redis GCRA, unshaped"
for run in "50 15 single" "50 15 moving" "50 15 skewed" "200 15 single" "200 15 moving" "200 15 skewed"; do
	set -- $run
	for shaper in sluice ranks redis-gcra none; do
		echo "   $1 machines, $3 demand, $shaper:"
		claims=on
		[ "$shaper" = ranks ] && shaper=sluice claims=off
		CLAIMS=$claims SHAPER=$shaper BUILD=${BUILD:-build} bash "$ROOT/bench/fleet_scale.sh" "$@" | grep '^   ' |
			sed 's/^/  /'
	done
done
echo "   the lease script alone, one item shared by N machines (bench/lease_cost.sh):"
bash "$ROOT/bench/lease_cost.sh" | grep '^   ' | sed 's/^/  /'

echo
echo "21. attaching the machine's segment (socket round trip, memfd, map, check), once a program"
cat >"$T/attach.ini" <<EOF
[sluice]
control_socket = $T/attach/ctl.sock
shm_name = /sluice-bench-attach-$$
[x]
match = 192.0.2.1
rate = 1/s
EOF
"$B/sluiced" -f -c "$T/attach.ini" 2>"$T/attach.log" &
attachd=$!
aseg="$T/attach/sluice-bench-attach-$$.segment"
for _ in $(seq 50); do [ -S "$aseg" ] && break; sleep 0.1; done
read -r ap50 ap99 amax < <("$B/bench/attach_cost" "$aseg" 1000)
printf '   %-34s %6s us p50, %s us p99, %s us largest of 1,000\n' "attach:" "$ap50" "$ap99" "$amax"
kill "$attachd" 2>/dev/null
wait "$attachd" 2>/dev/null || true
"$B/sluice" segments --remove "$aseg" >/dev/null 2>&1 || true

echo
echo "22. real clients the shim once missed, at the destination (server receive times)"
BUILD=${BUILD:-build} bash "$ROOT/bench/clients.sh"
