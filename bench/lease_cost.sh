#!/usr/bin/env bash
# make bench, item 20: the lease script's cost a call at 100, 1,000 and 10,000
# machines on one item (bench/lease_cost.py), against a Redis of the bench's own.
# The figure docs/design.md's paper fleets are drawn from.
. "$(dirname "$0")/../tests/integration/fleet_lib.sh"

start_redis
for n in ${LEASE_COST_SIZES:-100 1000 10000}; do
	python3 "$ROOT/bench/lease_cost.py" "$REDIS_PORT" "$ROOT/src/daemon/fleet.lua" "$n" 20000 ||
		fail "lease_cost.py at $n machines"
done
