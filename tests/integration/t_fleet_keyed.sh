#!/usr/bin/env bash
# tier: serial
# A keyed section shared by the fleet (issue 11): per = address, 20/s each, three
# daemons.  Machines 1 and 2 send to two endpoints, machine 3 to the first only.
# At the destination each endpoint gets its own 20/s (not 20/s per machine: about
# 19.9 over the fleet), and Redis holds leases only for the keys in use - none for
# an endpoint nobody sends to.  `sluice top` shows each key's share.
. "$(dirname "$0")/fleet_lib.sh"

start_server --also 127.0.2.1 --also 127.0.2.2 --also 127.0.2.3
start_redis
for n in 1 2 3; do
	fleet_config $n "$T/m$n.ini" <<EOF2
[hooks]
match = 127.0.2.0/24:$PORT
per = address
rate = 20/s
scope = fleet
max_wait = 30s
EOF2
	start_machine $n
done
sleep 2.5 # the settling time of an empty Redis
WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"

# keyed_offer MACHINE ADDR RATE: that machine's clients offer RATE/s to ADDR.
KO_PIDS=()
keyed_offer() {
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$T/${SHM_NAME#/}-$1.segment" timeout 80 python3 "$HELPERS/offer.py" "$2" "$PORT" "$3" 14 \
		--procs 3 >"$T/offer-$1-$2.out" 2>&1 &
	KO_PIDS+=($!)
	BG_PIDS+=($!)
}
t0=$(now_ns)
keyed_offer 1 127.0.2.1 30
keyed_offer 1 127.0.2.2 30
keyed_offer 2 127.0.2.1 30
keyed_offer 2 127.0.2.2 30
keyed_offer 3 127.0.2.1 30
sleep 6
# `sluice top` on machine 1 shows each key's share of its own 20/s.
"$SLUICE" top --segment "$T/${SHM_NAME#/}-1.segment" --count 1 >"$T/top.txt" || fail "sluice top"
for dst in 127.0.2.1 127.0.2.2; do
	grep -Eq "^  key $dst +[0-9]+ admitted, share [0-9.]+$" "$T/top.txt" ||
		fail "sluice top does not show $dst's share: $(cat "$T/top.txt")"
done
# Each leased key is a hash of the machines' entries, a sorted set of their
# expiries, their running totals and the ranks of the grid they hold
# (src/daemon/fleet.lua).
# Claims (docs/design.md, "Claims") keep a cursor and a set of claimed ranks
# beside an item's grid, only while they are made: counted with their item.
all=$(redis-cli -p "$REDIS_PORT" --scan --pattern "sluice:{t$$}:i:hooks/*" | sort)
note "leased keys: $(echo $all)"
for k in $(echo "$all" | grep -E ':r:(cursor|grid:claimed)$'); do
	case $k in
	"sluice:{t$$}:i:hooks/127.0.2.1:r:"* | "sluice:{t$$}:i:hooks/127.0.2.2:r:"*) ;;
	*) fail "claims kept for a key not in use: $k" ;;
	esac
done
keys=$(echo "$all" | grep -vE ':r:(cursor|grid:claimed)$' | tr '\n' ' ')
want=""
for dst in 127.0.2.1 127.0.2.2; do
	want+="sluice:{t$$}:i:hooks/$dst:r sluice:{t$$}:i:hooks/$dst:r:exp sluice:{t$$}:i:hooks/$dst:r:grid "
	want+="sluice:{t$$}:i:hooks/$dst:r:totals "
done
[ "$keys" = "$want" ] || fail "Redis should hold the two keys in use, and only them: $keys"
wait "${KO_PIDS[@]}"
t1=$(now_ns)
sleep 0.3
python3 "$HELPERS/fleet_check.py" "$T/syn.log" --from $((t0 + 2000000000)) --to "$t1" --what "two endpoints" \
	--share 127.0.2.1=19.9/4 --share 127.0.2.2=19.9/4 || fail "an endpoint did not get its own 20/s over the fleet"
# The bound (docs/design.md, "The grid"): each key's slots are one grid shared by
# the machines, R·(S + ε) + 2: 22 in any second of 20/s.
for dst in 127.0.2.1 127.0.2.2; do
	python3 "$HELPERS/fleet_check.py" "$T/syn.log" --from "$t0" --to "$t1" --only "$dst" --what "$dst" \
		--max-per-second 22 || fail "$dst saw more than the fleet's bound in a second"
done
echo "ok"
