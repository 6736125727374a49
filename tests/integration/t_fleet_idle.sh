#!/usr/bin/env bash
# tier: serial
# A machine whose clients stopped gives its share back (docs/design.md, "Across
# machines": a flow that stopped).  Two machines share 100/s on the grid, both
# offering 200/s; machine 1's clients stop after 4 s.  Within 4 s its share is
# nothing (0.5-1.4 s here) and machine 2 holds the whole rate - before, a stopped flow's demand
# only faded (30% a round, and half a request a second for as long as its
# one-second average showed anything), so it kept a share it never used.  While
# its callers were held the share stayed: held callers are demand whatever the
# schedule shows.  Then machine 1's clients come back and are killed -9 while
# held: their promise to look again lapses with them (a caller held looks within
# 100 ms), and the share goes back as before.  Never above 102 in any second.
. "$(dirname "$0")/fleet_lib.sh"

start_server --also 127.0.1.1 --also 127.0.1.2
start_redis
for n in 1 2; do
	fleet_config "$n" "$T/m$n.ini" <<EOF2
[api]
match = 127.0.1.0/24:$PORT
rate = 100/s
scope = fleet
max_wait = 60s
EOF2
	start_machine "$n"
done
sleep 2.5 # the settling time of an empty Redis
WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"
t0=$(now_ns)
offer 2 200 24
offer 1 200 4

# share_until N WANT TRIES: look at machine N's share every 0.1 s, at most TRIES
# times, until WANT (a python condition on s) holds; prints the share then, or
# fails with 1 having printed the last one.
share_until() {
	local s
	for _ in $(seq "$3"); do
		s=$(machine_json "$1" api share)
		if python3 -c 'import sys; s = float(sys.argv[1]); sys.exit(0 if ('"$2"') else 1)' "$s"; then
			echo "$s"
			return 0
		fi
		sleep 0.1
	done
	echo "$s"
	return 1
}

# While its clients offer (until t0 + 4 s and their start-up), machine 1's
# share never falls to nothing.
sleep 1.5
for _ in $(seq 20); do
	[ "$(now_ns)" -lt $((t0 + 3500000000)) ] || break
	s=$(machine_json 1 api share)
	python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 5 else 1)' "$s" ||
		fail "machine 1's share fell to $s while its clients were held"
	sleep 0.1
done
wait "$O_PID_1"
t_stop=$(now_ns)
s=$(share_until 1 's == 0' 40) || fail "machine 1's clients stopped 4 s ago and it still holds $s/s"
note "machine 1 stopped: share $s after $(( ($(now_ns) - t_stop) / 1000000 )) ms"
s=$(share_until 2 's >= 95' 30) || fail "machine 2 holds $s/s of 100/s with machine 1 idle"
note "machine 2's share: $s/s"

# Machine 1's clients again, killed -9 while held.
offer 1 200 30
sleep 2
s=$(machine_json 1 api share)
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 5 else 1)' "$s" || fail "machine 1 came back to $s/s only"
pkill -9 -f "^python3 .*offer.py 127.0.1.1 " || fail "no client of machine 1 to kill"
t_kill=$(now_ns)
wait "$O_PID_1" 2>/dev/null # its timeout, whose python3 was killed
s=$(share_until 1 's == 0' 40) || fail "machine 1's clients were killed 4 s ago and it still holds $s/s"
note "machine 1's clients killed: share $s after $(( ($(now_ns) - t_kill) / 1000000 )) ms"
t1=$(now_ns)
wait "$O_PID_2" 2>/dev/null
python3 "$HELPERS/fleet_check.py" "$T/syn.log" --from "$t0" --to "$t1" --what "two machines, one stopping" \
	--max-per-second 102 || fail "more than the limit in a second"
echo "ok"
