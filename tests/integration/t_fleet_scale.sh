#!/usr/bin/env bash
# tier: serial
# A fleet of fifty (issue 29, CI size; make bench item 20 runs 50, 100 and 200):
# fifty daemons on this machine, each its own segment and machine name, share
# 100/s through one Redis, each one's client offering 10/s (bench/fleet_scale.sh).
# Held at the destination: never more in any one-second span than the grid's
# bound, R·(S + ε) + 2 (docs/design.md, "The grid"): 102 while the machines place
# Redis's clock within 10 ms, whatever their number - where the shares' bound
# of before, 0.995·R·S and one a machine, allowed 149; the rate, and the fewest
# in a whole second, as floors of 95 - the issue's 98 is make bench's figure
# (item 20), as a two-core machine running fifty daemons and their clients
# gave 97 in a second now and then (97-100 in the runs of 2026-12-04); and
# Redis's calls at most five a second a daemon, plus the wake-ups' spare (6).
. "$(dirname "$0")/lib.sh"

BUILD=${BUILD:-build} timeout 240 bash "$(dirname "$0")/../../bench/fleet_scale.sh" 50 12 steady >"$T/scale.out" 2>&1 ||
	fail "the fleet of fifty did not run: $(tail -5 "$T/scale.out")"
cat "$T/scale.out" | grep '^   ' | sed 's/^   /  /'
grep -q "took longer to start" "$T/scale.out" && fail "the clients did not start in time: no verdict"
read -r rate most fewest calls < <(awk '
	/delivered after 2 s:/ { sub("/s", "", $5); r = $5 }
	/per second:/ { m = $3; f = $10 }
	/Redis:/ { sub("[(]", "", $4); c = $4 }
	END { print r, m, f, c }' "$T/scale.out")
[ -n "$most" ] && [ -n "$calls" ] || fail "no figures: $(cat "$T/scale.out")"
[ "$most" -le 102 ] || fail "$most in one second from fifty machines sharing 100/s (bound 102)"
awk -v r="$rate" 'BEGIN { exit !(r >= 95) }' || fail "the fleet of fifty delivered $rate/s of 100/s (floor 95)"
[ "$fewest" -ge 95 ] || fail "$fewest in a whole second from fifty machines sharing 100/s (floor 95)"
awk -v c="$calls" 'BEGIN { exit !(c <= 6) }' || fail "$calls lease calls a second a daemon (at most 6)"
echo "ok"
