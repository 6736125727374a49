#!/bin/sh
# A stand-in for systemctl inside t_deb's throwaway root, where no systemd runs:
# enough of it for the package's maintainer scripts and deb-systemd-invoke to
# manage sluiced as the unit would - as user sluice, in the foreground, its
# runtime directory made and kept (RuntimeDirectoryPreserve=yes), every process of
# the service stopped with it (KillMode=control-group: the keeper too), and its
# file descriptor store kept across a restart, flushed by a stop (fake_service.py).
# Every call is logged, for the test to check what the scripts asked for.
log=/var/log/fake-systemctl.log
pidfile=/run/fake-sluiced.pid
wants=/etc/systemd/system/multi-user.target.wants/sluiced.service

active() {
	[ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}
start() {
	active && return 0
	install -d -o sluice -g sluice -m 0755 /run/sluice
	/usr/bin/sluice check -c /etc/sluice/sluice.ini >/dev/null || return 1
	python3 /usr/local/lib/fake_service.py start sluice -- /usr/bin/sluiced -f -c /etc/sluice/sluice.ini \
		</dev/null >"$pidfile" 2>>/var/log/sluiced.log || return 1
	# Ready when it answers, as Type=notify would wait for.
	for _ in $(seq 50); do
		/usr/bin/sluice stat -c /etc/sluice/sluice.ini >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "fake systemctl: sluiced did not answer" >&2
	return 1
}
stop() { # [keep]: a restart is queued, the store stays
	if active; then
		start-stop-daemon --stop --pidfile "$pidfile" --retry TERM/5/KILL/2 >/dev/null
	fi
	rm -f "$pidfile"
	# The rest of the service's processes (its cgroup): the segment's keeper.
	pkill -TERM -u sluice 2>/dev/null
	for _ in $(seq 20); do pgrep -u sluice >/dev/null || break; sleep 0.1; done
	pkill -KILL -u sluice 2>/dev/null
	[ "${1:-}" = keep ] || python3 /usr/local/lib/fake_service.py flush
	return 0
}

# Options first (--system, --quiet, --root=/ ...), then the verb.
while [ $# -gt 0 ]; do
	case "$1" in
	--version) echo "systemd 252 (252)"; exit 0 ;;
	--*) shift ;;
	*) break ;;
	esac
done
verb=${1:-}
# Logged as "VERB UNIT", the options left out.
echo "$verb $(for a in "$@"; do case "$a" in -*) ;; "$verb") ;; *) printf '%s ' "$a" ;; esac; done)" |
	sed 's/ *$//' >>"$log"
case "$verb" in
daemon-reload) exit 0 ;;
list-units) exit 0 ;;
is-enabled)
	if [ -L "$wants" ]; then echo enabled; exit 0; fi
	echo disabled
	exit 1
	;;
is-active) active ;;
enable | preset | reenable)
	mkdir -p "${wants%/*}"
	ln -sf /lib/systemd/system/sluiced.service "$wants"
	;;
disable) rm -f "$wants" ;;
start) start ;;
stop) stop ;;
restart) stop keep && start ;;
try-restart) if active; then stop keep && start; fi ;;
*) echo "fake systemctl: $verb not known" >&2; exit 1 ;;
esac
