# Containers as the tests make them (docs/containers.md "Containers"): a "pod" is `unshare
# --ipc --pid --mount --fork` with /run a tmpfs of its own and a host directory of
# segment sockets bind-mounted at /run/sluice, as `docker run -v
# /run/sluice:/run/sluice` gives a container.  Sourced after lib.sh.

# pod [--no-mount] HOSTDIR CMD...: CMD in a pod of its own, HOSTDIR at /run/sluice
# (--no-mount: an empty /run/sluice, as a container not given the mount).  CMD
# runs under the pod's init, as a container's program does (a low pid there, which
# on the host is another process, or none).  Killing the unshare kills the pod
# (--kill-child), whatever it started.
pod() {
	local mount=1
	[ "$1" = --no-mount ] && { mount=0; shift; }
	unshare --ipc --pid --mount --fork --mount-proc --kill-child -- bash -c '
		mount -t tmpfs -o mode=755 tmpfs /run && mkdir -p /run/sluice || exit 97
		if [ "$1" = 1 ]; then mount --bind "$2" /run/sluice || exit 98; fi
		shift 2
		"$@" <&0 &
		wait $!' pod "$mount" "$@"
}
