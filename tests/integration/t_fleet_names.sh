#!/usr/bin/env bash
# tier: serial
# Redis named by a host name, resolved off the daemon's loop (docs/design.md,
# "Names of Redis"): the loop also answers the control socket, reaps dead lock
# holders and renews every lease, and getaddrinfo() waits as long as the name
# servers take.  In a network and mount namespace of the test's own, a name
# server on 127.0.0.1:53 that answers each query 3 s late:
#   - a daemon whose `redis =` is a name serves at once (stat answers within
#     2 s of its start) while the name is being resolved, then connects, and its
#     fleet limit holds at the destination;
#   - Redis restarted: the name is resolved again while stat still answers
#     within a second (before, every reconnection stopped the loop for 3 s);
#   - a name the server does not know: stat says down, the log says why;
#   - a Sentinel named by a host name (fleet_find.c): found once its name is.
if [ -z "${SLUICE_TEST_NETNS:-}" ]; then
	exec env SLUICE_TEST_NETNS=1 unshare -mn bash "$0" "$@"
fi
. "$(dirname "$0")/fleet_lib.sh"

ip link set lo up || fail "cannot bring up lo in the test's network namespace"
echo "nameserver 127.0.0.1" >"$T/resolv.conf"
echo "127.0.0.1 localhost" >"$T/hosts"
mount --bind "$T/resolv.conf" /etc/resolv.conf && mount --bind "$T/hosts" /etc/hosts ||
	fail "cannot bind-mount the test's resolv.conf and hosts"
start_helper dport "$T/dns.port" "DNS responder" python3 "$HELPERS/dns_server.py" --port 53 \
	--port-file "$T/dns.port" --log "$T/dns.log" --name redis.test=127.0.0.1 --name sentinel.test=127.0.0.1 --only-named --delay 3
start_server --also 127.0.1.1
start_redis

# answers_within SECONDS N: machine N's stat answers within SECONDS.
answers_within() {
	timeout "$1" "$SLUICE" stat -c "$T/m$2.ini" --json >"$T/quick.json" 2>"$T/quick.err"
}

FLEET_REDIS="redis.test:$REDIS_PORT" fleet_config 1 "$T/m1.ini" <<EOF2
[api]
match = 127.0.1.0/24:$PORT
rate = 10/s
scope = fleet
max_wait = 60s
EOF2
t_start=$(now_ns)
start_machine 1
served_ms=$(( ($(now_ns) - t_start) / 1000000 ))
state=$(redis_field 1 state)
note "machine 1 served after $served_ms ms, Redis $state"
[ "$served_ms" -lt 2000 ] || fail "the daemon served only after $served_ms ms: its loop waited for the name"
[ "$state" != up ] || fail "Redis up before its name could be resolved (the name server answers 3 s late)"
for _ in $(seq 100); do
	[ "$(redis_field 1 state)" = up ] && break
	sleep 0.1
done
[ "$(redis_field 1 state)" = up ] || fail "not on Redis 10 s after start: $(redis_field 1 state)"
grep -q "redis.test" "$T/dns.log" || fail "the name server was never asked for redis.test"

# Shaping on the lease; meanwhile Redis is restarted, and the name asked again.
sleep 2.5 # an empty Redis's settling
WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"
t0=$(now_ns)
offer 1 20 8
sleep 2
asked=$(grep -c 'redis.test' "$T/dns.log")
kill_redis
start_redis "$REDIS_PORT"
slow=0
for _ in $(seq 20); do
	answers_within 1 1 || slow=$((slow + 1))
	sleep 0.1
done
[ "$slow" = 0 ] || fail "stat went unanswered for a second $slow times while the name was resolved again"
[ "$(grep -c 'redis.test' "$T/dns.log")" -gt "$asked" ] || fail "the name was not asked again after Redis went"
wait "$O_PID_1"
t1=$(now_ns)
python3 "$HELPERS/fleet_check.py" "$T/syn.log" --from "$t0" --to "$t1" --what "a Redis by name" \
	--at-least 20 --max-per-second 11 || fail "the fleet limit did not hold"

# A name nobody knows.
FLEET_REDIS="nowhere.test:$REDIS_PORT" fleet_config 2 "$T/m2.ini" <<EOF2
[api]
match = 127.0.1.0/24:$PORT
rate = 10/s
scope = fleet
EOF2
start_machine 2
for _ in $(seq 100); do
	grep -q "nowhere.test: " "$T/sluiced-2.log" && break
	sleep 0.1
done
note "$(grep 'nowhere.test' "$T/sluiced-2.log")"
grep -q "nowhere.test: " "$T/sluiced-2.log" || fail "the log does not say the name was not found"
answers_within 1 2 || fail "stat did not answer with the name unknown"
[ "$(redis_field 2 state)" = down ] || fail "Redis not down with its name unknown: $(redis_field 2 state)"

# A Sentinel by name.
SPORT=$(free_port)
start_sentinels names "$REDIS_PORT" "$SPORT"
FLEET_REDIS_CONF="redis_sentinels = sentinel.test:$SPORT
redis_master = names" fleet_config 3 "$T/m3.ini" <<EOF2
[api]
match = 127.0.1.0/24:$PORT
rate = 10/s
scope = fleet
EOF2
t_start=$(now_ns)
start_machine 3
served_ms=$(( ($(now_ns) - t_start) / 1000000 ))
[ "$served_ms" -lt 2000 ] || fail "the daemon with a named Sentinel served only after $served_ms ms"
for _ in $(seq 150); do
	[ "$(redis_field 3 state)" = up ] && break
	sleep 0.1
done
note "machine 3 (a Sentinel by name) served after $served_ms ms; master $(master_of 3)"
[ "$(master_of 3)" = "127.0.0.1:$REDIS_PORT sentinels up" ] || fail "not on the master the Sentinel names: $(master_of 3)"
echo "ok"
