#!/usr/bin/env bash
# tier: serial
# One rate across machines (issue 11): three daemons share a 100/s section through
# Redis, each with its own clients.  Everything is judged at the destination, by the
# kernel's SYN stamps, each machine's clients sending to their own address:
#   - equal demand (80/s offered by each, 30 s): 100/s within 4%, no second above
#     102, each machine a third within 5%;
#   - skewed demand (10, 200, 200/s): about 10, 43, 43;
#   - a machine's demand steps from nothing to 200/s: it comes to its third within
#     three seconds - a generous bound: make bench prints how soon, 0.1-0.8 s
#     being usual, but a clean clone's make test once took 2.13 s on this
#     two-core machine (2026-12-04) and a slow build (make asan) 1.15 s - and no
#     second goes above 102 meanwhile;
#   - a daemon killed -9 while its clients go on: their share lapses (the lease is
#     not renewed) and goes to the others, never both: within 2.5 s, a lease
#     life for its entry to expire and one of quarantine for its ranks;
#   - a daemon whose wall clock is 30 s ahead (faketime): shares as before;
#   - `sluice top` and the metrics show a machine's share.
. "$(dirname "$0")/fleet_lib.sh"

start_server --also 127.0.1.1 --also 127.0.1.2 --also 127.0.1.3
start_redis
for n in 1 2 3; do
	fleet_config $n "$T/m$n.ini" <<EOF
[api]
match = 127.0.1.0/24:$PORT
rate = 100/s
scope = fleet
max_wait = 30s
EOF
	start_machine $n
done
sleep 2.5 # Redis started empty: the settling time (grants capped at what is held)
WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"
fleet_syns() { python3 "$HELPERS/fleet_check.py" "$T/syn.log" "$@"; }

# --- equal demand, 30 s ---
t0=$(now_ns)
for n in 1 2 3; do offer $n 80 30; done
# Meanwhile `sluice top` shows machine 1's share of the fleet's rate.
sleep 5
"$SLUICE" top --segment "$T/${SHM_NAME#/}-1.segment" --count 1 >"$T/top.txt" || fail "sluice top"
grep -Eq "^  fleet: share [0-9.]+ of 100, 3 machines, lease [0-9]+ ms old$" "$T/top.txt" ||
	fail "sluice top does not show the fleet share: $(cat "$T/top.txt")"
# ... and its metrics: a share of the 100/s under what the fleet has, three machines.
"$SLUICE" stat --segment "$T/${SHM_NAME#/}-1.segment" --prometheus >"$T/metrics.txt" || fail "stat --prometheus"
python3 "$HELPERS/prom_check.py" "$T/metrics.txt" --expect 'sluice_fleet_share_per_second{section="api"}>10' \
	--expect 'sluice_fleet_machines{section="api"}=3' >/dev/null ||
	fail "the fleet's metrics: $(grep fleet "$T/metrics.txt")"
awk '$1 == "sluice_fleet_share_per_second{section=\"api\"}" { exit !($2 < 100) }' "$T/metrics.txt" ||
	fail "machine 1's share is not under the fleet's rate: $(grep fleet_share "$T/metrics.txt")"
wait "$O_PID_1" "$O_PID_2" "$O_PID_3"
t1=$(now_ns)
sleep 0.3
# Never above 102 in any second is the promise (the grid's R·(S + ε) + 2), held
# strictly; how close below 100/s the fleet comes is make bench's figure (item
# 18), so here only a shortfall past 4% fails (a clean-clone run on a busy
# two-core machine once gave 97.58/s).
fleet_syns --from $((t0 + 1000000000)) --to "$t1" --what "equal demand, 30 s" --rate 100 --within 4 \
	--max-per-second 102 --share 127.0.1.1=33.33/5 --share 127.0.1.2=33.33/5 --share 127.0.1.3=33.33/5 ||
	fail "equal demand: the fleet's rate or shares are off"
calls=$(machine_json 1 - redis | python3 -c 'import ast, sys; print(ast.literal_eval(sys.stdin.read())["calls"])')
note "machine 1 made $calls lease calls in $(( (t1 - t0) / 1000000000 + 6 )) s"

# --- skewed demand: 10, 200, 200/s ---
t0=$(now_ns)
offer 1 10 12
offer 2 200 12
offer 3 200 12
wait "$O_PID_1" "$O_PID_2" "$O_PID_3"
t1=$(now_ns)
sleep 0.3
fleet_syns --from $((t0 + 3000000000)) --to "$t1" --what "skewed demand" --max-per-second 102 \
	--share 127.0.1.1=10/15 --share 127.0.1.2=44/10 --share 127.0.1.3=44/10 ||
	fail "skewed demand: the light machine did not get what it asks and the others the rest"

# --- a step: machine 3 from nothing to 200/s, 3 s in ---
t0=$(now_ns)
offer 1 200 9
offer 2 200 9
offer 3 200 6 3
wait "$O_PID_1" "$O_PID_2" "$O_PID_3"
t1=$(now_ns)
sleep 0.3
step=$((t0 + 3000000000))
fleet_syns --from "$t0" --to "$t1" --what "demand step" --max-per-second 102 || fail "step: a second above 102"
# From machine 3's first connection (its clients' start takes a moment).
first=$(awk -v s="$t0" '$4 == "127.0.1.3" && $1 >= s { print $1; exit }' "$T/syn.log")
[ -n "$first" ] || fail "step: machine 3 sent nothing"
fleet_syns --from "$first" --to "$t1" --what "from the step" --reached "127.0.1.3=33.2/${REBALANCE_S:-3.0}" ||
	fail "step: machine 3 did not come to its third in time"
fleet_syns --from $((step + 1500000000)) --to "$t1" --what "after the step" \
	--share 127.0.1.3=33.2/15 || fail "step: machine 3 did not keep its third"

# --- machine 3's daemon killed -9 while its clients go on ---
t0=$(now_ns)
offer 1 200 9
offer 2 200 9
offer 3 200 9
sleep 3
kill -9 "$M_PID_3"
kill_at=$(now_ns)
wait "$O_PID_1" "$O_PID_2" "$O_PID_3"
t1=$(now_ns)
sleep 0.3
fleet_syns --from "$t0" --to "$t1" --what "a daemon killed" --max-per-second 102 ||
	fail "daemon killed: its clients' share and the others' overlapped"
fleet_syns --from $((kill_at + 2500000000)) --to "$t1" --what "after the kill" --share 127.0.1.3=0/0 \
	--share 127.0.1.1=49.75/10 --share 127.0.1.2=49.75/10 ||
	fail "daemon killed: its share did not go to the others within 2.5 s"

# --- machine 3 again, its wall clock 30 s ahead ---
FAKETIME_DONT_FAKE_MONOTONIC=1 start_machine 3 faketime -f "+30s"
sleep 1.5
t0=$(now_ns)
for n in 1 2 3; do offer $n 200 8; done
wait "$O_PID_1" "$O_PID_2" "$O_PID_3"
t1=$(now_ns)
sleep 0.3
fleet_syns --from $((t0 + 2000000000)) --to "$t1" --what "a clock 30 s ahead" --max-per-second 102 \
	--share 127.0.1.1=33.17/5 --share 127.0.1.2=33.17/5 --share 127.0.1.3=33.17/5 ||
	fail "a machine whose clock is 30 s ahead changed the shares"
echo "ok"
