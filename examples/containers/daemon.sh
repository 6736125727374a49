#!/bin/sh
# The daemon's container (examples/containers/): put the shim and the config
# where the applications' containers mount them, then run sluiced in the
# foreground.  /run/sluice is the host's directory (a hostPath, a bind mount), so
# every container given it shares these queues (docs/containers.md, "Containers").
set -eu
dir=/run/sluice
config=${SLUICE_CONFIG:-/etc/sluice/sluice.ini}
mkdir -p "$dir"
# The applications load the shim from here: LD_PRELOAD=/run/sluice/libsluice.so
# (it needs a glibc at least as new as this image's, Debian 12's 2.36).
cp "${SLUICE_LIB:-/usr/lib/sluice/libsluice.so}" "$dir/libsluice.so.new" && mv "$dir/libsluice.so.new" "$dir/libsluice.so"
# ... and read what is shaped from here: SLUICE_CONFIG=/run/sluice/sluice.ini.
cp "$config" "$dir/sluice.ini.new" && mv "$dir/sluice.ini.new" "$dir/sluice.ini"
exec sluiced -f -c "$config"
