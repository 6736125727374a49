#!/usr/bin/env bash
# make bench, item 20: many daemons on one machine, each its own segment and
# machine name, sharing one rate through a Redis of the bench's own.
# bench/fleet_scale.sh N SECONDS steady|single|moving|skewed:
#   steady  every machine's client offers 10/s against a fleet rate of 100/s,
#           from two blocking processes;
#   single  the same from one blocking process a machine (one waiter each);
#   moving  a tenth of the machines offer 20/s each second, another tenth the
#           next second (the demand moving among them every second);
#   skewed  a tenth of the machines offer 40/s each from four processes, the
#           others 2/s each from one (uneven demand: busy machines beside light
#           ones).
# CLAIMS=off runs the daemons with claims = off (docs/config.md: ranks only; on,
# the default, serves light machines by claims).
# SHAPER=sluice (the default: N daemons, the clients under the shim),
# SHAPER=redis-gcra (no daemons: each request first reserves the fleet's next
# slot through one call of a GCRA script in the same Redis - the per-request
# limiter a fleet could run instead, helpers/offer.py) or SHAPER=none (the same
# clients unshaped).
# Prints, from the destination's kernel SYN stamps: the delivered rate, the most
# in any one-second span and the fewest in any whole second after the first two;
# and from Redis: lease calls a second, its CPU a second, and the script's cost
# per call (INFO commandstats) - what docs/design.md's figures for larger fleets
# are drawn from.
. "$(dirname "$0")/../tests/integration/fleet_lib.sh"

N=${1:-50}
SECS=${2:-20}
MODE=${3:-steady}
SHAPER=${SHAPER:-sluice}
RATE=100
start_server
start_redis
for n in $(seq "$N"); do
	[ "$SHAPER" = sluice ] || break
	FLEET_CLAIMS=${CLAIMS:-} fleet_config "$n" "$T/m$n.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
rate = $RATE/s
scope = fleet
max_wait = 60s
EOF
	sed -i 's/^log_level = debug$/log_level = notice/; s/^hosts = 3$/hosts = '"$N"'/' "$T/m$n.ini"
	"$SLUICED" -f -c "$T/m$n.ini" 2>>"$T/sluiced-$n.log" &
	BG_PIDS+=($!)
done
for n in $(seq "$N"); do
	[ "$SHAPER" = sluice ] || break
	for _ in $(seq 100); do
		[ -S "$T/ctl-$n.sock" ] && break
		sleep 0.1
	done
done
[ "$SHAPER" = sluice ] && sleep 3 # an empty Redis's settling
WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"

redis_info() { redis-cli -p "$REDIS_PORT" INFO "$1" | tr -d '\r'; }
cpu() { redis_info cpu | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { printf "%.3f", s }'; }
evals() { redis_info commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),usec=\([0-9]*\),.*/\1 \2/p'; }

# The clients first (a hundred python processes take seconds to start on two
# cores), all told to begin at one wall-clock second; the count starts two
# seconds after that.
begin=$(( $(date +%s) + N / 5 + 5 ))
pids=()
for n in $(seq "$N"); do
	# Offering for longer than the count lasts (they are stopped after it): on a
	# loaded machine the count may start well after `begin`, and seconds counted
	# after the clients ended would read as the fleet's shortfall.
	procs=2
	if [ "$MODE" = steady ]; then
		what=(10 $((SECS + N / 5 + 40)))
	elif [ "$MODE" = single ]; then
		what=(10 $((SECS + N / 5 + 40)))
		procs=1
	elif [ "$MODE" = skewed ]; then
		if [ $((n % 10)) = 0 ]; then
			what=(40 $((SECS + N / 5 + 40)))
			procs=4
		else
			what=(2 $((SECS + N / 5 + 40)))
			procs=1
		fi
	else
		# Machine n offers 20/s in the seconds s with s % 10 == n % 10.
		what=(20 $((SECS + N / 5 + 40)) --every 10 --phase $((n % 10)))
	fi
	case $SHAPER in
	sluice) under=(env LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$T/${SHM_NAME#/}-$n.segment") ;;
	redis-gcra) under=(env) what+=(--redis-gcra "$REDIS_PORT" --limit "$RATE") ;;
	*) under=(env) ;;
	esac
	"${under[@]}" timeout $((SECS + N / 5 + 90)) python3 \
		"$HELPERS/offer.py" 127.0.0.1 "$PORT" "${what[@]}" --procs "$procs" --at "$begin" >/dev/null 2>&1 &
	pids+=($!)
done
[ "$(date +%s)" -lt "$begin" ] || echo "bench: the clients took longer to start than allowed: figures are off" >&2
sleep $((begin - $(date +%s) + 2))
read -r e0 u0 < <(evals)
c0=$(cpu)
t0=$(now_ns)
sleep "$SECS"
t1=$(now_ns)
read -r e1 u1 < <(evals)
c1=$(cpu)
for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
wait "${pids[@]}" 2>/dev/null
sleep 0.3
python3 "$(dirname "$0")/fleet_scale.py" "$T/syn.log" $((t0 - 2000000000)) "$t1" "$RATE" ${SCALE_SECONDS:+all} | sed 's/^/   /'
awk -v e0="$e0" -v e1="$e1" -v u0="$u0" -v u1="$u1" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v n="$N" 'BEGIN {
	s = (t1 - t0) / 1e9
	printf "   %-34s %.0f calls/s (%.1f per machine), %.1f%% of one core, %.0f us per call\n", "Redis:",
		(e1 - e0) / s, (e1 - e0) / s / n, 100 * (c1 - c0) / s, (e1 > e0 ? (u1 - u0) / (e1 - e0) : 0)
}'
