#!/bin/bash
# t_deb's part inside the throwaway root (an overlay of this machine, in its own
# mount and IPC namespaces): install, use, upgrade under load, remove and purge
# the package as an operator would.  deb_inside.sh DIR PORT: DIR holds the two
# packages (sluice.deb, sluice-next.deb) and receives what the test checks.
set -u
dir=$1
port=$2
fail() {
	echo "FAIL: $*"
	echo "systemctl calls: $(tr '\n' ';' <"$log" 2>/dev/null)"
	echo "sluiced said: $(tail -20 /var/log/sluiced.log 2>/dev/null)"
	echo "the fd store said: $(tail -20 /var/log/fake-store.log 2>/dev/null)"
	exit 1
}
log=/var/log/fake-systemctl.log

# --- install: user and group, runtime directory, enabled and started ---
# As the README has it (`sudo apt install ./build/sluice_*.deb`; root here, and
# -y for no terminal).
(cd "$dir" && apt install -y ./sluice.deb) >"$dir/dpkg-install.log" 2>&1 ||
	fail "apt install: $(cat "$dir/dpkg-install.log")"
getent passwd sluice >/dev/null || fail "install made no user sluice"
getent group sluice >/dev/null || fail "install made no group sluice"
[ -L /etc/systemd/system/multi-user.target.wants/sluiced.service ] || fail "install did not enable sluiced"
for c in sluice sluiced; do
	[ -e /usr/share/bash-completion/completions/$c ] || fail "no bash completion for $c installed"
done
bash -c '. /usr/share/bash-completion/completions/sluice && complete -p sluice sluiced' >/dev/null 2>&1 ||
	fail "the installed bash completion does not load"
grep -qx "start sluiced.service" "$log" || fail "install did not start sluiced: $(cat "$log")"
pid1=$(cat /run/fake-sluiced.pid)
[ "$(stat -c %U /proc/"$pid1")" = sluice ] || fail "sluiced does not run as user sluice"
[ "$(stat -c %G /run/sluice/sluice.sock)" = sluice ] || fail "control socket not in group sluice"
[ -f /usr/share/man/man5/sluice.ini.5.gz ] || fail "no sluice.ini(5)"
sluice --version >"$dir/version" || fail "sluice --version"

# An operator's section, and a user of the group who is shaped by it.
cat >>/etc/sluice/sluice.ini <<EOF

[local-api]
match = 127.0.0.1:$port
rate = 4/s
max_wait = 1m
EOF
sluice reload >"$dir/reload" 2>&1 || fail "sluice reload: $(cat "$dir/reload")"
useradd -M sluicetester || fail "useradd"
usermod -aG sluice sluicetester || fail "usermod -aG sluice (docs/operations.md, \"Running it on a machine\")"
# The user's program: 40 connections at 4/s (10 s), across the upgrade below.
runuser -u sluicetester -- sluice run -- python3 "$dir/fetch.py" "http://127.0.0.1:$port/deb" 40 \
	>"$dir/client.out" 2>&1 &
client=$!
sleep 1

# --- upgrade while the program waits: the daemon restarts on the new binary,
# takes the segment back from the service's store, and the queue's spacing
# holds ---
segment_id() { sluice stat --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["segment"]["id"])'; }
[ "$(stat -c %U:%a /run/sluice/sluice.segment)" = sluice:660 ] ||
	fail "the segment's socket: $(ls -l /run/sluice)"
segment=$(segment_id)
[ -n "$segment" ] || fail "no segment served"
dpkg -i "$dir/sluice-next.deb" >"$dir/dpkg-upgrade.log" 2>&1 || fail "upgrade: $(cat "$dir/dpkg-upgrade.log")"
grep -qx "try-restart sluiced.service" "$log" || fail "upgrade did not restart sluiced: $(cat "$log")"
grep -qx "stop sluiced.service" "$log" && fail "upgrade stopped sluiced outright"
pid2=$(cat /run/fake-sluiced.pid)
[ -n "$pid2" ] && [ "$pid2" != "$pid1" ] && kill -0 "$pid2" || fail "no new sluiced after the upgrade"
[ "$(segment_id)" = "$segment" ] || fail "the upgrade made a new segment"
grep -q "^\[local-api\]" /etc/sluice/sluice.ini || fail "the upgrade lost the operator's config"
kill -0 "$client" 2>/dev/null || fail "the program was done before the upgrade restarted sluiced: nothing was tested"
wait "$client" || fail "the shaped program failed: $(cat "$dir/client.out")"
sluice stat --json >"$dir/stat.json" || fail "sluice stat after the upgrade"

# --- remove: stopped, files gone, config kept; purge: config and enablement gone ---
dpkg -r sluice >"$dir/dpkg-remove.log" 2>&1 || fail "dpkg -r: $(cat "$dir/dpkg-remove.log")"
grep -qx "stop sluiced.service" "$log" || fail "removal did not stop sluiced"
kill -0 "$pid2" 2>/dev/null && fail "sluiced still runs after removal"
[ -e /usr/bin/sluice ] || [ -e /usr/lib/sluice/libsluice.so ] && fail "removal left the programs"
[ -f /etc/sluice/sluice.ini ] || fail "removal took the config (only purge may)"
dpkg -P sluice >"$dir/dpkg-purge.log" 2>&1 || fail "dpkg -P: $(cat "$dir/dpkg-purge.log")"
[ -e /etc/sluice/sluice.ini ] && fail "purge left the config"
[ -e /etc/systemd/system/multi-user.target.wants/sluiced.service ] && fail "purge left the unit enabled"
dpkg -s sluice >/dev/null 2>&1 && fail "dpkg still knows sluice after purge"
pgrep -x sluice-keeper >/dev/null && fail "purge left the segment's keeper: $(pgrep -a -x sluice-keeper)"
[ -e /run/sluice ] && fail "purge left /run/sluice: $(ls -la /run/sluice)"
cp "$log" "$dir/systemctl.log"

# --- without systemd (a container): installed, not started, and it says how ---
rm -rf /run/systemd/system
: >"$log"
dpkg -i "$dir/sluice.deb" >"$dir/dpkg-nosystemd.log" 2>&1 || fail "dpkg -i without systemd: $(cat "$dir/dpkg-nosystemd.log")"
grep -q "systemd is not running, so sluiced was not started. The unit runs it as user sluice" \
	"$dir/dpkg-nosystemd.log" || fail "without systemd, the install did not say how to start sluiced: $(cat "$dir/dpkg-nosystemd.log")"
grep -q "^start" "$log" && fail "without systemd, something was started: $(cat "$log")"
# Started as the message says: as user sluice, durable quotas kept.
cmd=$(grep -o "'runuser -u sluice -- sluiced [^']*'" "$dir/dpkg-nosystemd.log" | tr -d "'")
[ -n "$cmd" ] || fail "the message names no command: $(cat "$dir/dpkg-nosystemd.log")"
$cmd 2>"$dir/sluiced-nosystemd.log" || fail "'$cmd' did not start sluiced: $(cat "$dir/sluiced-nosystemd.log")"
pid3=$(pgrep -x sluiced | head -1)
[ -n "$pid3" ] && [ "$(stat -c %U /proc/"$pid3")" = sluice ] || fail "sluiced started as the message says does not run as sluice"
[ "$(stat -c %U:%a /var/lib/sluice)" = sluice:700 ] || fail "/var/lib/sluice is not sluice's, 0700: $(stat -c %U:%a /var/lib/sluice)"
sluice stat >/dev/null 2>"$dir/stat-nosystemd.err" || fail "sluice stat against it: $(cat "$dir/stat-nosystemd.err")"
# Purged without systemd: the daemon, its keeper, /run/sluice and /var/lib/sluice go.
dpkg -P sluice >"$dir/dpkg-purge2.log" 2>&1 || fail "dpkg -P without systemd: $(cat "$dir/dpkg-purge2.log")"
for _ in $(seq 50); do kill -0 "$pid3" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid3" 2>/dev/null && fail "purge without systemd left the daemon running"
for _ in $(seq 50); do pgrep -x sluice-keeper >/dev/null || break; sleep 0.1; done
pgrep -x sluice-keeper >/dev/null && fail "purge without systemd left the segment's keeper: $(pgrep -a -x sluice-keeper)"
[ -e /run/sluice ] && fail "purge without systemd left /run/sluice"
[ -e /var/lib/sluice ] && fail "purge left /var/lib/sluice"
echo "inside: ok"
