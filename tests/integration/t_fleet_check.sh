#!/usr/bin/env bash
# tier: check
# The fleet's settings (issue 11): sluice check refuses each bad one with a clear
# line; `sluice check --redis` says what it found - a Redis answering with the
# script loaded, one refusing the password, one not there; and a daemon whose
# Redis wants a password (or an ACL user) read from redis_auth gets its leases.
. "$(dirname "$0")/fleet_lib.sh"

bad() { # bad WHAT EXPECTED-TEXT: stdin's config must be refused, saying EXPECTED-TEXT
	cat >"$T/bad.ini"
	if "$SLUICE" check -c "$T/bad.ini" >/dev/null 2>"$T/bad.err"; then
		fail "$1: accepted"
	fi
	grep -q -- "$2" "$T/bad.err" || fail "$1: no '$2' in: $(cat "$T/bad.err")"
}
sec='[a]
match = 127.0.0.1
rate = 10/s
scope = fleet'
printf '%s\n' "$sec" | bad "fleet with no redis" "names no usable redis"
printf '[sluice]\nredis = nothost:99999\n%s\n' "$sec" | bad "bad endpoint" "want HOST:PORT"
printf '[sluice]\nredis = 127.0.0.1:0\n%s\n' "$sec" | bad "port 0" "want HOST:PORT"
printf '[sluice]\nredis = relative.sock\n%s\n' "$sec" | bad "relative socket" "want HOST:PORT"
printf '[sluice]\nredis = 127.0.0.1:6379\nrefresh = 5ms\n%s\n' "$sec" | bad "refresh too short" "want 10ms to 10s"
printf '[sluice]\nredis = 127.0.0.1:6379\nrefresh = 1m\n%s\n' "$sec" | bad "refresh too long" "want 10ms to 10s"
printf '[sluice]\nredis = 127.0.0.1:6379\nredis_auth = pw.txt\n%s\n' "$sec" | bad "relative auth" "absolute path"
printf '[sluice]\nredis = 127.0.0.1:6379\nhosts = 0\n%s\n' "$sec" | bad "no hosts" "hosts"
printf '[sluice]\nredis = 127.0.0.1:6379\nfleet = a b\n%s\n' "$sec" | bad "fleet name" "bad fleet"
printf '[sluice]\nredis = 127.0.0.1:6379\n[a]\nmatch = 127.0.0.1\nrate = 10/s\nscope = all\n' |
	bad "scope" "want machine | fleet"

# --- check --redis against a Redis with a password, then an ACL user ---
start_redis
redis-cli -p "$REDIS_PORT" CONFIG SET requirepass s3cret >/dev/null
# What the daemon runs (docs/config.md): its own commands and the lease script's.
acl_cmds=(+eval +evalsha +script +publish +subscribe +time +info +ping +get +set +del +exists +pexpire
	+hget +hmget +hset +hgetall +hdel +hexists +hincrby +zadd +zrangebyscore +zrem +setrange +strlen)
redis-cli -p "$REDIS_PORT" -a s3cret --no-auth-warning ACL SETUSER shaper on '>pw2' '~sluice:*' '&sluice:*' \
	"${acl_cmds[@]}" >/dev/null
printf 's3cret\n' >"$T/pw"
printf 'shaper pw2\n' >"$T/acl"
printf 'wrong\n' >"$T/wrong"
chmod 600 "$T/pw" "$T/acl" "$T/wrong"
conf() { # conf AUTHFILE: a fleet config on this Redis
	printf '[sluice]\nshm_name = %s-1\ncontrol_socket = %s/ctl-1.sock\nredis = 127.0.0.1:%s\n' \
		"$SHM_NAME" "$T" "$REDIS_PORT"
	[ -n "$1" ] && printf 'redis_auth = %s\n' "$1"
	printf 'fleet = t%s\nmachine = m1\n[a]\nmatch = 127.0.1.0/24:%s\nrate = 10/s\nscope = fleet\n' "$$" "$PORT"
}
start_server --also 127.0.1.1
conf "$T/pw" >"$T/pw.ini"
"$SLUICE" check --redis -c "$T/pw.ini" >"$T/check.out" || fail "check --redis with the password: $(tail -2 "$T/check.out")"
grep -q "lease script loaded" "$T/check.out" || fail "check --redis did not say the script loaded"
note "$(tail -1 "$T/check.out")"
conf "$T/wrong" >"$T/wrong.ini"
"$SLUICE" check --redis -c "$T/wrong.ini" >"$T/check.out" && fail "check --redis accepted a wrong password"
grep -q "authentication refused" "$T/check.out" || fail "no word of the refused password: $(tail -1 "$T/check.out")"
conf "" >"$T/none.ini"
"$SLUICE" check --redis -c "$T/none.ini" >"$T/check.out" && fail "check --redis without the password passed"
# An ACL user the lease script cannot work as (no zrem, which only the sweep of
# an expired entry runs): check says so, rather than the daemon some rounds on.
short_cmds=()
for c in "${acl_cmds[@]}"; do [ "$c" = +zrem ] || short_cmds+=("$c"); done
redis-cli -p "$REDIS_PORT" -a s3cret --no-auth-warning ACL SETUSER short on '>pw3' '~sluice:*' '&sluice:*' \
	"${short_cmds[@]}" >/dev/null
printf 'short pw3\n' >"$T/short"
chmod 600 "$T/short"
conf "$T/short" >"$T/short.ini"
"$SLUICE" check --redis -c "$T/short.ini" >"$T/check.out" && fail "check --redis passed an ACL without zrem"
grep -q "did not answer as it should.*ACL user lacks a command" "$T/check.out" ||
	fail "no word of the command the ACL lacks: $(tail -1 "$T/check.out")"
redis_port=$REDIS_PORT
REDIS_PORT=$(free_port)
conf "" >"$T/gone.ini"
"$SLUICE" check --redis -c "$T/gone.ini" >"$T/check.out" && fail "check --redis passed with no Redis there"
grep -q "cannot connect" "$T/check.out" || fail "no word of the missing Redis: $(tail -1 "$T/check.out")"
REDIS_PORT=$redis_port

# --- a daemon with an ACL user gets its lease ---
conf "$T/acl" >"$T/m1.ini"
"$SLUICE" check --redis -c "$T/m1.ini" >/dev/null || fail "check --redis with the ACL user"
start_machine 1
for _ in $(seq 50); do
	[ "$(machine_json 1 a share)" != 0.0 ] && break
	sleep 0.1
done
[ "$(machine_json 1 a share)" = 10.0 ] || fail "no lease through the ACL user (alone, the whole grid of 10/s): share $(machine_json 1 a share)"
echo "ok"
