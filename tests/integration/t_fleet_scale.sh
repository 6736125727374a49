#!/usr/bin/env bash
# tier: serial
# A fleet of fifty (CI size; make bench item 20 runs 50 and 200): fifty daemons on
# this machine, each its own segment and machine name, share 100/s through one
# Redis (bench/fleet_scale.sh), claims on (the default: docs/config.md), in two
# demand shapes:
#   single  each machine one blocking client offering 10/s: one waiter each, a
#           request or two a round - served by claims (docs/design.md, "Claims");
#           the leases alone gave 88.7-95.3/s;
#   moving  a tenth of the machines offer 20/s each second, another tenth the
#           next: judged against the same clients unshaped in this test (the
#           leases alone gave 35% of it).
# Held at the destination, in both: never more in any one-second span than the
# grid's bound, R·(S + ε) + 2 (docs/design.md, "The grid"): 102 while the
# machines place Redis's clock within 10 ms, whatever their number.  Floors with
# room for a loaded two-core machine running fifty daemons and their clients -
# single >= 97/s, moving >= 85% of unshaped; the targets (98%, 90%) are make
# bench's - and Redis's calls at most what one call a request would make, plus
# eight a machine (a lease call every round and the wake-ups' spare among them).
. "$(dirname "$0")/lib.sh"

scale() { # NAME SHAPE [SHAPER]: the bench's run, its figures into $T/NAME.out
	SHAPER=${3:-sluice} BUILD=${BUILD:-build} timeout 300 bash "$(dirname "$0")/../../bench/fleet_scale.sh" 50 12 "$2" \
		>"$T/$1.out" 2>&1 || fail "the fleet of fifty ($1) did not run: $(tail -5 "$T/$1.out")"
	grep '^   ' "$T/$1.out" | sed "s/^   /  $1: /"
	grep -q "took longer to start" "$T/$1.out" && fail "$1: the clients did not start in time: no verdict"
	read -r rate most calls < <(awk '
		/delivered after 2 s:/ { sub("/s", "", $5); r = $5 }
		/per second:/ { m = $3 }
		/Redis:/ { c = $2 }
		END { print r, m, c }' "$T/$1.out")
	[ -n "$rate" ] && [ -n "$most" ] && [ -n "$calls" ] || fail "$1: no figures: $(cat "$T/$1.out")"
}

scale single single
[ "$most" -le 102 ] || fail "single: $most in one second from fifty machines sharing 100/s (bound 102)"
awk -v r="$rate" 'BEGIN { exit !(r >= 97) }' || fail "single: fifty one-waiter machines got $rate/s of 100/s (floor 97)"
awk -v c="$calls" -v r="$rate" 'BEGIN { exit !(c <= r + 8 * 50) }' ||
	fail "single: $calls Redis calls a second for $rate requests a second (at most one a request and 8 a machine)"

scale plain moving none
plain=$rate
scale moving moving
[ "$most" -le 102 ] || fail "moving: $most in one second from fifty machines sharing 100/s (bound 102)"
awk -v r="$rate" -v p="$plain" 'BEGIN { exit !(r >= 0.85 * (p < 100 ? p : 100)) }' ||
	fail "moving: $rate/s where the same clients unshaped reached $plain/s (floor 85%)"
awk -v c="$calls" -v r="$rate" 'BEGIN { exit !(c <= r + 8 * 50) }' ||
	fail "moving: $calls Redis calls a second for $rate requests a second (at most one a request and 8 a machine)"
echo "ok"
