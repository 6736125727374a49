#!/usr/bin/env bash
# make bench, item 14: one rate across three daemons sharing through a Redis of
# the bench's own (loopback, no persistence), each daemon's clients on their own
# address so the destination's kernel stamps tell them apart.  Prints:
#   - lease calls per second per daemon while the fleet carries 100/s, and while
#     it carries about 10,000/s (target: at most 5, the same at both loads);
#   - the aggregate rate's error for 3 daemons at 100/s (80/s offered by each);
#   - the time to rebalance after a demand step: from machine 3's first
#     connection to its clients getting 90% of a third over half a second (median
#     of three steps);
#   - admission cost in a section shared by the fleet against a local one.
# Reuses the integration tests' helpers (servers, the SYN witness, Redis).
. "$(dirname "$0")/../tests/integration/fleet_lib.sh"

B=$BUILD_DIR
start_server --also 127.0.1.1 --also 127.0.1.2 --also 127.0.1.3
REFUSED=$(free_port) # nothing listens there: a connect is refused in microseconds
start_redis
for n in 1 2 3; do
	fleet_config $n "$T/m$n.ini" <<EOF
[api]
match = 127.0.1.0/24:$PORT
rate = 100/s
scope = fleet
max_wait = 30s

[bulk]
match = 127.0.1.0/24:$REFUSED
rate = 10000/s
burst = 100
scope = fleet
max_wait = 30s
EOF
	sed -i 's/^log_level = debug$/log_level = info/' "$T/m$n.ini"
	start_machine $n
done
sleep 2.5
WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"

calls() { # calls N: machine N's lease calls so far
	machine_json "$1" - redis | python3 -c 'import ast, sys; print(ast.literal_eval(sys.stdin.read())["calls"])'
}
admitted() { # admitted SECTION: admissions over the three machines so far
	local sum=0 n
	for n in 1 2 3; do sum=$((sum + $(machine_json $n "$1" admitted))); done
	echo $sum
}
per_daemon() { # per_daemon BEFORE... SECONDS: calls a second per daemon, "a / b / c"
	local s=${*: -1} out="" n=1 c
	for c in "${@:1:3}"; do
		out+="${out:+ / }$(awk -v a="$c" -v b="$(calls $n)" -v s="$s" 'BEGIN { printf "%.1f", (b - a) / s }')"
		n=$((n + 1))
	done
	echo "$out"
}

# --- 100/s: three machines offering 80/s for 20 s ---
c1=$(calls 1) c2=$(calls 2) c3=$(calls 3)
t0=$(now_ns)
for n in 1 2 3; do offer $n 80 20; done
wait "$O_PID_1" "$O_PID_2" "$O_PID_3"
t1=$(now_ns)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
low=$(per_daemon "$c1" "$c2" "$c3" "$secs")
sleep 0.3
rate=$(python3 "$HELPERS/fleet_check.py" "$T/syn.log" --from $((t0 + 1000000000)) --to "$t1" |
	sed -n 's/.* = \([0-9.]*\)\/s.*/\1/p')

# --- about 10,000/s: each machine's loop connecting as fast as its share allows ---
c1=$(calls 1) c2=$(calls 2) c3=$(calls 3)
a0=$(admitted bulk)
t0=$(now_ns)
for n in 1 2 3; do
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$T/${SHM_NAME#/}-$n.segment" timeout 60 "$B/bench/connect_loop" 127.0.1.$n "$REFUSED" 40000 \
		refused >/dev/null &
	eval "L_PID_$n=\$!"
done
wait "$L_PID_1" "$L_PID_2" "$L_PID_3"
t1=$(now_ns)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')
high=$(per_daemon "$c1" "$c2" "$c3" "$secs")
bulk=$(awk -v a="$a0" -v b="$(admitted bulk)" -v s="$secs" 'BEGIN { printf "%.0f", (b - a) / s }')

printf '   %-34s %s per daemon\n' "lease calls/s at 100/s:" "$low"
printf '   %-34s %s per daemon (the fleet carried %s/s)\n' "lease calls/s at 10,000/s:" "$high" "$bulk"
printf '   %-34s %s/s of 100/s (%s%%; on the grid the whole rate is shared)\n' "aggregate rate, 3 daemons:" "$rate" \
	"$(awk -v r="$rate" 'BEGIN { printf "%+.1f", r - 100 }')"

# --- the step, three times: machines 1 and 2 at 200/s, machine 3 joins 3 s in ---
steps=()
for _ in 1 2 3; do
	t0=$(now_ns)
	offer 1 200 7
	offer 2 200 7
	offer 3 200 4 3
	wait "$O_PID_1" "$O_PID_2" "$O_PID_3"
	t1=$(now_ns)
	sleep 0.3
	first=$(awk -v s="$((t0 + 2000000000))" '$4 == "127.0.1.3" && $1 >= s { print $1; exit }' "$T/syn.log")
	steps+=("$(python3 "$HELPERS/fleet_check.py" "$T/syn.log" --from "$first" --to "$t1" \
		--reached 127.0.1.3=33.2/99 | sed -n 's/.* came to 90% of .* \([0-9.]*\) s after.*/\1/p')")
	sleep 3 # machine 3's demand fades before the next step
done
printf '   %-34s %s s (median of %s s)\n' "rebalance after a demand step:" \
	"$(printf '%s\n' "${steps[@]}" | sort -n | sed -n 2p)" "$(echo "${steps[@]}" | sed 's/ /, /g')"

read -r local shared < <("$B/bench/admit_bench" fleet 1000000)
printf '   %-34s %s ns shared (scope = fleet), %s ns local\n' "admission cost:" "$shared" "$local"
