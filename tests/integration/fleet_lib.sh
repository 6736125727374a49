# Helpers for the fleet tests (t_fleet_*.sh): a redis-server of the test's own on a
# loopback port (no persistence, never the system's), and three daemons on this
# machine standing for three machines, each with its own segment, control socket
# and name in the fleet.  Machine N's clients send to 127.0.1.N, so the witness
# (--key dst) tells the machines apart at the destination.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v redis-server >/dev/null || fail "redis-server is missing (scripts/deps.sh installs it)"

# free_port: a loopback port nothing listens on now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# cluster_port: a loopback port for a Cluster node: at most 55535, and free
# together with its bus port (10000 above it).
cluster_port() {
	python3 -c '
import random, socket
for _ in range(200):
    p = random.randint(20000, 45000)
    try:
        for q in (p, p + 10000):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
    except OSError:
        continue
    print(p); break'
}

# start_redis [PORT]: redis-server on 127.0.0.1:PORT (a free one when not given),
# empty, saving nothing; sets REDIS_PORT and REDIS_PID.
start_redis() {
	REDIS_PORT=${1:-${REDIS_PORT:-$(free_port)}}
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no \
		--protected-mode no --logfile "$T/redis.log" --loglevel verbose &
	REDIS_PID=$!
	BG_PIDS+=($REDIS_PID)
	for _ in $(seq 100); do
		[ "$(redis-cli -p "$REDIS_PORT" ping 2>/dev/null)" = PONG ] && return 0
		sleep 0.05
	done
	fail "redis-server did not start: $(tail -3 "$T/redis.log")"
}

# start_redis_node NAME PORT [ARGS...]: another redis-server of the test's own on
# 127.0.0.1:PORT, its files under $T/NAME; sets NODE_PID_NAME.  NODE_PASS: the
# password ARGS give it (--requirepass), for the check that it answers.
start_redis_node() {
	local name=$1 port=$2
	shift 2
	mkdir -p "$T/$name"
	(cd "$T/$name" && exec redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
		--protected-mode no --logfile "$T/$name/redis.log" --dir "$T/$name" "$@") &
	eval "NODE_PID_$name=\$!"
	BG_PIDS+=($!)
	for _ in $(seq 100); do
		[ "$(redis-cli -p "$port" ${NODE_PASS:+--no-auth-warning -a "$NODE_PASS"} ping 2>/dev/null)" = PONG ] &&
			return 0
		sleep 0.05
	done
	fail "redis-server $name did not start: $(tail -3 "$T/$name/redis.log")"
}

# start_sentinels MASTER_NAME MASTER_PORT PORT...: a Sentinel on each PORT (redis-server
# --sentinel, a config file of its own that it rewrites), watching the master, a
# quorum of two, down after one second.  SENTINEL_PASS: the Sentinels' own
# password; MASTER_PASS: the master's (and its replicas').
start_sentinels() {
	local name=$1 mport=$2 port
	shift 2
	for port in "$@"; do
		mkdir -p "$T/sentinel-$port"
		cat >"$T/sentinel-$port/sentinel.conf" <<EOF3
port $port
bind 127.0.0.1
protected-mode no
dir $T/sentinel-$port
logfile $T/sentinel-$port/sentinel.log
sentinel monitor $name 127.0.0.1 $mport 2
sentinel down-after-milliseconds $name 1000
sentinel failover-timeout $name 5000
sentinel parallel-syncs $name 1
${MASTER_PASS:+sentinel auth-pass $name $MASTER_PASS}
${SENTINEL_PASS:+requirepass $SENTINEL_PASS}
${SENTINEL_PASS:+sentinel sentinel-pass $SENTINEL_PASS}
EOF3
		redis-server "$T/sentinel-$port/sentinel.conf" --sentinel &
		BG_PIDS+=($!)
	done
	for port in "$@"; do
		for _ in $(seq 100); do
			[ "$(redis-cli -p "$port" ${SENTINEL_PASS:+--no-auth-warning -a "$SENTINEL_PASS"} ping 2>/dev/null)" = PONG ] &&
				break
			sleep 0.05
		done
		[ "$(redis-cli -p "$port" ${SENTINEL_PASS:+--no-auth-warning -a "$SENTINEL_PASS"} ping 2>/dev/null)" = PONG ] ||
			fail "sentinel $port did not start"
	done
}

kill_redis() {
	kill -9 "$REDIS_PID" 2>/dev/null
	wait "$REDIS_PID" 2>/dev/null
}

# fleet_config N FILE: machine N's config - [sluice] with its segment, socket and
# the fleet's redis, then stdin's sections.
fleet_config() {
	{
		printf '[sluice]\nshm_name = %s-%s\ncontrol_socket = %s/ctl-%s.sock\n' "$SHM_NAME" "$1" "$T" "$1"
		# FLEET_REDIS_CONF: the lines that say where Redis is (Sentinels, a Cluster).
		if [ -n "${FLEET_REDIS_CONF:-}" ]; then
			printf '%s\n' "$FLEET_REDIS_CONF"
		else
			printf 'redis = %s\n' "${FLEET_REDIS:-127.0.0.1:$REDIS_PORT}"
		fi
		printf 'fleet = t%s\nmachine = m%s\nhosts = 3\nlog_level = debug\n' "$$" "$1"
		# FLEET_CLAIMS: [sluice] claims (docs/config.md), when set.
		[ -z "${FLEET_CLAIMS:-}" ] || printf 'claims = %s\n' "$FLEET_CLAIMS"
		printf '\n'
		cat
	} >"$2"
}

# start_machine N [PREFIX...]: machine N's daemon on $T/m$N.ini (run under PREFIX,
# e.g. faketime); sets M_PID_N.
start_machine() {
	local n=$1
	shift
	"$@" "$SLUICED" -f -c "$T/m$n.ini" 2>>"$T/sluiced-$n.log" &
	eval "M_PID_$n=\$!"
	BG_PIDS+=($!)
	for _ in $(seq 100); do
		if "$SLUICE" stat -c "$T/m$n.ini" >/dev/null 2>"$T/stat.err" && ! grep -q "no daemon answers" "$T/stat.err"; then
			# Under a prefix that forks (faketime does), the daemon is its child:
			# that is the process to kill, in the test and at cleanup.
			local child
			child=$(pgrep -P "$(eval echo "\$M_PID_$n")" -x sluiced | head -1)
			if [ -n "$child" ]; then
				eval "M_PID_$n=$child"
				BG_PIDS+=("$child")
			fi
			return 0
		fi
		sleep 0.1
	done
	cat "$T/sluiced-$n.log"
	fail "machine $n's sluiced did not start"
}

# offer N RATE SECONDS [START_AFTER]: machine N's clients offer RATE/s to the
# server for SECONDS, in the background; their count goes to $T/offer-N.out.
offer() {
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$T/${SHM_NAME#/}-$1.segment" timeout $(( ${3%.*} + ${4:-0} + 60 )) \
		python3 "$HELPERS/offer.py" "127.0.1.$1" "$PORT" "$2" "$3" --procs 4 --start-after "${4:-0}" \
		>"$T/offer-$1.out" 2>&1 &
	BG_PIDS+=($!)
	eval "O_PID_$1=\$!"
}

# master_of N: "ADDRESS FOUND_BY STATE" - which Redis machine N's daemon takes its
# leases from, how it found it, and whether Redis is up (sluice stat --json).
master_of() {
	"$SLUICE" stat -c "$T/m$1.ini" --json >"$T/w$1.json" 2>/dev/null &&
		python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
print(d["redis_master"]["address"], d["redis_master"]["found_by"], d["redis"]["state"])' "$T/w$1.json"
}

# on_master WANT TRIES N...: wait, looking every 0.1 s at most TRIES times, until
# every machine N says WANT (as master_of does); prints when (now_ns), or fails
# with 1 and prints nothing.
on_master() {
	local want=$1 tries=$2 n ok
	shift 2
	for _ in $(seq "$tries"); do
		ok=1
		for n in "$@"; do
			[ "$(master_of "$n")" = "$want" ] || ok=0
		done
		if [ $ok = 1 ]; then
			now_ns
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# machine_json N SECTION FIELD: a field of machine N's section in `sluice stat --json`.
machine_json() {
	"$SLUICE" stat -c "$T/m$1.ini" --json >"$T/s$1.json" && json_field "$T/s$1.json" "$2" "$3"
}

# redis_field N FIELD: a field of machine N's Redis state in `sluice stat --json`
# (state, calls, machines, ...).
redis_field() {
	machine_json "$1" - redis | python3 -c 'import ast, sys; print(ast.literal_eval(sys.stdin.read())[sys.argv[1]])' "$2"
}

now_ns() {
	date +%s%N
}
