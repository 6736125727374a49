#!/usr/bin/env bash
# tier: serial
# The fleet on a Redis Cluster (issue 29): three masters on loopback (redis-server
# --cluster-enabled yes; redis-cli --cluster create).  Three daemons are given
# only the two nodes that do not serve the fleet's slot (redis_cluster): they
# learn the slot's master from CLUSTER SLOTS.  `sluice check --redis` says which
# node serves the slot.  Mid-run the slot is moved to another master by hand, as
# redis-cli --cluster reshard does it (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT
# NODE), a second in each half-way state: calls meet TRYAGAIN (keys on both
# nodes) and ASK (all moved, the slot not yet given over), then MOVED.  The
# daemons follow (sluice stat --json names the new master, found by cluster);
# at the destination no second ever holds more than the fleet's bound (R·S + the
# machines' bursts = 33 at 30/s), and the fleet shares its rate on the new node.
# Then that master, which has a replica, is killed -9: the Cluster promotes the
# replica, and the daemons find it again through the nodes they were given
# (CLUSTER SLOTS) within 15 s (the nodes' timeout is 2 s), shaping on the leases in
# hand meanwhile, never above the bound.
# Tested with Redis 7.0 (Debian 12); Valkey speaks the same protocol.
. "$(dirname "$0")/fleet_lib.sh"

start_server --also 127.0.1.1 --also 127.0.1.2 --also 127.0.1.3
P=()
for i in 1 2 3; do
	P[$i]=$(cluster_port)
	start_redis_node "node$i" "${P[$i]}" --cluster-enabled yes --cluster-config-file "$T/node$i/nodes.conf" \
		--cluster-node-timeout 2000
done
redis-cli --cluster create "127.0.0.1:${P[1]}" "127.0.0.1:${P[2]}" "127.0.0.1:${P[3]}" --cluster-replicas 0 \
	--cluster-yes >"$T/create.out" 2>&1 || fail "redis-cli --cluster create: $(tail -5 "$T/create.out")"
for _ in $(seq 100); do
	ok=1
	for i in 1 2 3; do
		redis-cli -p "${P[$i]}" CLUSTER INFO | grep -q "^cluster_state:ok" || ok=0
	done
	[ $ok = 1 ] && break
	sleep 0.1
done
[ $ok = 1 ] || fail "the cluster did not come up"

SLOT=$(redis-cli -p "${P[1]}" CLUSTER KEYSLOT "sluice:{t$$}")
owner_of() { # the number of the node that serves SLOT, as node 1 sees it
	local port
	port=$(redis-cli -p "${P[1]}" CLUSTER NODES | awk -v s="$SLOT" '{
		for (i = 9; i <= NF; i++) {
			n = split($i, r, "-"); lo = r[1]; hi = (n > 1 ? r[2] : r[1])
			if ($i !~ /^\[/ && s + 0 >= lo + 0 && s + 0 <= hi + 0) { split($2, a, "[:@]"); print a[2] }
		}
	}')
	for i in 1 2 3; do [ "${P[$i]}" = "$port" ] && echo "$i"; done
}
SRC=$(owner_of)
[ -n "$SRC" ] || fail "no node serves slot $SLOT"
DST=$(( SRC % 3 + 1 ))
OTHER=$(( DST % 3 + 1 ))
note "the fleet's slot $SLOT is on node $SRC (port ${P[$SRC]}); it moves to node $DST"
# A replica for the node the slot moves to, for the failover at the end.
P[4]=$(cluster_port)
start_redis_node node4 "${P[4]}" --cluster-enabled yes --cluster-config-file "$T/node4/nodes.conf" \
	--cluster-node-timeout 2000
redis-cli --cluster add-node "127.0.0.1:${P[4]}" "127.0.0.1:${P[1]}" --cluster-slave --cluster-master-id \
	"$(redis-cli -p "${P[$DST]}" CLUSTER MYID)" >"$T/add.out" 2>&1 || fail "add-node: $(tail -5 "$T/add.out")"
for _ in $(seq 100); do
	redis-cli -p "${P[4]}" ROLE 2>/dev/null | head -1 | grep -q slave &&
		redis-cli -p "${P[4]}" INFO replication | grep -q "master_link_status:up" && break
	sleep 0.1
done
redis-cli -p "${P[4]}" INFO replication | grep -q "master_link_status:up" || fail "node 4 did not become a replica"

FLEET_REDIS_CONF="redis_cluster = 127.0.0.1:${P[$DST]} 127.0.0.1:${P[$OTHER]}"
for n in 1 2 3; do
	fleet_config $n "$T/m$n.ini" <<EOF2
[api]
match = 127.0.1.0/24:$PORT
rate = 30/s
scope = fleet
max_wait = 60s
EOF2
done
"$SLUICE" check -c "$T/m1.ini" --redis >"$T/check.out" 2>&1 || fail "check --redis: $(cat "$T/check.out")"
grep -q "^node 127.0.0.1:${P[$DST]}: the fleet's slot $SLOT is served by 127.0.0.1:${P[$SRC]}$" "$T/check.out" ||
	fail "check --redis does not say which node serves the slot: $(cat "$T/check.out")"
grep -q "^redis 127.0.0.1:${P[$SRC]}: version .*found by cluster$" "$T/check.out" ||
	fail "check --redis did not reach the slot's master: $(cat "$T/check.out")"

for n in 1 2 3; do start_machine $n; done
on_master "127.0.0.1:${P[$SRC]} cluster up" 50 1 >/dev/null ||
	fail "machine 1 is not on the slot's master: $(master_of 1)"
sleep 2 # the settling of an empty start
WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"

t0=$(now_ns)
for n in 1 2 3; do offer $n 20 40; done
sleep 5
src_id=$(redis-cli -p "${P[$SRC]}" CLUSTER MYID)
dst_id=$(redis-cli -p "${P[$DST]}" CLUSTER MYID)
redis-cli -p "${P[$DST]}" CLUSTER SETSLOT "$SLOT" IMPORTING "$src_id" >/dev/null
redis-cli -p "${P[$SRC]}" CLUSTER SETSLOT "$SLOT" MIGRATING "$dst_id" >/dev/null
mapfile -t keys < <(redis-cli -p "${P[$SRC]}" CLUSTER GETKEYSINSLOT "$SLOT" 100)
[ "${#keys[@]}" -ge 2 ] || fail "the fleet's slot holds ${#keys[@]} keys, expected its epoch and a lease"
# Half the keys moved: a call finds some here, some there (TRYAGAIN).
redis-cli -p "${P[$SRC]}" MIGRATE 127.0.0.1 "${P[$DST]}" "" 0 5000 KEYS "${keys[0]}" >/dev/null
sleep 1
# All moved, the slot still migrating: the source sends each call on (ASK).
mapfile -t keys < <(redis-cli -p "${P[$SRC]}" CLUSTER GETKEYSINSLOT "$SLOT" 100)
[ "${#keys[@]}" -eq 0 ] || redis-cli -p "${P[$SRC]}" MIGRATE 127.0.0.1 "${P[$DST]}" "" 0 5000 KEYS "${keys[@]}" >/dev/null
sleep 1
for i in "$DST" "$SRC" "$OTHER"; do
	redis-cli -p "${P[$i]}" CLUSTER SETSLOT "$SLOT" NODE "$dst_id" >/dev/null
done
t_moved=$(now_ns)
followed=$(on_master "127.0.0.1:${P[$DST]} cluster up" 100 1 2 3)
[ -n "$followed" ] || fail "the daemons did not follow the slot: $(for n in 1 2 3; do master_of $n; done)"
note "all three daemons on the slot's new master $(( (followed - t_moved) / 1000000 )) ms after it was given over"
grep -q "slot $SLOT moved to 127.0.0.1:${P[$DST]}" "$T"/sluiced-*.log || fail "no daemon followed a MOVED"
grep -q "slot $SLOT migrating: this call asks 127.0.0.1:${P[$DST]}" "$T"/sluiced-*.log ||
	fail "no daemon's call followed an ASK"
grep -q "slot $SLOT half moved (TRYAGAIN)" "$T"/sluiced-*.log || fail "no daemon met TRYAGAIN while the keys moved"
sleep 8
t_before_kill=$(now_ns)
kill -9 "$(eval echo "\$NODE_PID_node$DST")"
wait "$(eval echo "\$NODE_PID_node$DST")" 2>/dev/null
t_kill=$(now_ns)
promoted=$(on_master "127.0.0.1:${P[4]} cluster up" 200 1 2 3)
[ -n "$promoted" ] || fail "the daemons did not find the promoted replica: $(for n in 1 2 3; do master_of $n; done)"
took=$(( (promoted - t_kill) / 1000000 ))
note "all three daemons on the promoted replica $took ms after the slot's master was killed"
[ "$took" -le 15000 ] || fail "the daemons took $took ms to follow the Cluster's failover (at most 15 s)"
wait "$O_PID_1" "$O_PID_2" "$O_PID_3"
t1=$(now_ns)
sleep 0.3
fleet_syns() { python3 "$HELPERS/fleet_check.py" "$T/syn.log" "$@"; }
fleet_syns --from $((t0 + 1000000000)) --to "$t1" --what "around the move and the failover" --max-per-second 33 ||
	fail "a second above the fleet's bound while the slot moved or its master failed"
fleet_syns --from $((followed + 3000000000)) --to "$t_before_kill" --what "after the move" --rate 30 --within 20 ||
	fail "the fleet did not share 30/s on the slot's new master"
fleet_syns --from $((promoted + 3000000000)) --to "$t1" --what "after the failover" --rate 30 --within 20 ||
	fail "the fleet did not share 30/s on the promoted replica"
echo "ok"
