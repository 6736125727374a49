#!/bin/sh
# Install the Debian packages sluice needs, only those missing, by what is asked:
#   scripts/deps.sh [build]  building sluice and running `make run`'s demo (the
#                            default: what `make` and `make run` need, nothing more)
#   scripts/deps.sh unit     also cmocka: the unit tests (`make unit`), nothing more
#   scripts/deps.sh test     also every test, bench and packaging tool (`make test`,
#                            `bench`, `chaos`, `asan`, `fuzz`, `deb`)
#   scripts/deps.sh deb      building the package (`make deb`): the build's and the
#                            packaging tools, not the test rig
#   scripts/deps.sh cross    what `make cross` needs: Debian's arm64 cross compiler,
#                            the arm64 libraries (multiarch) and qemu-user
#   scripts/deps.sh plot     build, and gnuplot for `make run PLOT=FILE.png`
#   ... --check              only check; exit 1 if something is missing
#   ... --list               print the group's packages, one a line
# Fails loudly: a missing package that cannot be installed stops the build.
set -eu

# Package, and the file or command that shows it is present.  To build: a C
# compiler, libev, inih and hiredis (what the .deb's Depends names at run time),
# nghttp2's header (the shim loads its HPACK decoder when it first reads an HTTP/2
# answer),
# python3 for the man page; the demo adds curl.
BUILD_PACKAGES="
gcc:/usr/bin/gcc
make:/usr/bin/make
pkg-config:/usr/bin/pkg-config
libev-dev:/usr/include/ev.h
libinih-dev:/usr/include/ini.h
libhiredis-dev:/usr/include/hiredis/adapters/libev.h
libnghttp2-dev:/usr/include/nghttp2/nghttp2.h
python3:/usr/bin/python3
curl:/usr/bin/curl
"

# To test: cmocka; the real clients and servers of the transparency matrix
# (tests/integration/t_matrix.sh) and the programs that once broke (t_programs.sh);
# Redis for the fleet; the packaging and picture tools (`make deb`, lintian;
# gnuplot for the plots); the static programs `sluice run --seccomp` is tested with
# (busybox-static and a Go compiler; static C needs only gcc's libc6-dev);
# bind9's dig and nslookup, which send through libc's syscall().
TEST_PACKAGES="
libcmocka-dev:/usr/include/cmocka.h
faketime:/usr/bin/faketime
procps:/usr/bin/pkill
strace:/usr/bin/strace
wget:/usr/bin/wget
openssl:/usr/bin/openssl
nodejs:/usr/bin/node
socat:/usr/bin/socat
trickle:/usr/bin/trickle
git:/usr/bin/git
openssh-server:/usr/sbin/sshd
openssh-client:/usr/bin/ssh
rsync:/usr/bin/rsync
nghttp2-server:/usr/sbin/nghttpd
libwww-perl:/usr/share/perl5/LWP.pm
ruby:/usr/bin/ruby
php-cli:/usr/bin/php
php-curl:/usr/lib/php/20220829/curl.so
redis-server:/usr/bin/redis-server
redis-tools:/usr/bin/redis-cli
python3-requests:/usr/lib/python3/dist-packages/requests
python3-aiohttp:/usr/lib/python3/dist-packages/aiohttp
python3-httpx:/usr/lib/python3/dist-packages/httpx
python3-h2:/usr/lib/python3/dist-packages/h2
python3-grpcio:/usr/lib/python3/dist-packages/grpc
python3-aiosmtpd:/usr/lib/python3/dist-packages/aiosmtpd
python3-uvloop:/usr/lib/python3/dist-packages/uvloop
python3-yaml:/usr/lib/python3/dist-packages/yaml
systemd:/usr/bin/systemd-analyze
tmux:/usr/bin/tmux
passwd:/usr/sbin/useradd
lintian:/usr/bin/lintian
gnuplot-nox:/usr/bin/gnuplot
fakeroot:/usr/bin/fakeroot
busybox-static:/bin/busybox
golang-go:/usr/bin/go
nginx-light:/usr/sbin/nginx
iproute2:/sbin/ip
bind9-dnsutils:/usr/bin/dig
"

CROSS_PACKAGES="
gcc-aarch64-linux-gnu:/usr/bin/aarch64-linux-gnu-gcc
libc6-dev:arm64:/usr/include/aarch64-linux-gnu/bits/libc-header-start.h
libinih-dev:arm64:/usr/lib/aarch64-linux-gnu/libinih.a
libev-dev:arm64:/usr/lib/aarch64-linux-gnu/libev.so
libcmocka-dev:arm64:/usr/lib/aarch64-linux-gnu/libcmocka.so
libhiredis-dev:arm64:/usr/lib/aarch64-linux-gnu/libhiredis.so
qemu-user:/usr/bin/qemu-aarch64
"
PACKAGES=$BUILD_PACKAGES
case "${1:-}" in
build) shift ;;
unit) PACKAGES="$BUILD_PACKAGES libcmocka-dev:/usr/include/cmocka.h"; shift ;;
test) PACKAGES="$BUILD_PACKAGES $TEST_PACKAGES"; shift ;;
plot) PACKAGES="$BUILD_PACKAGES gnuplot-nox:/usr/bin/gnuplot"; shift ;;
deb) PACKAGES="$BUILD_PACKAGES lintian:/usr/bin/lintian"; shift ;;
cross | --cross) PACKAGES=$CROSS_PACKAGES; shift ;;
esac
if [ "$PACKAGES" = "$CROSS_PACKAGES" ]; then
	# arm64 packages install beside amd64 ones only once dpkg knows the architecture.
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then
		[ "$(id -u)" -eq 0 ] && dpkg --add-architecture arm64 ||
			sudo dpkg --add-architecture arm64 || {
			echo "sluice: cannot add the arm64 architecture to dpkg" >&2
			exit 1
		}
	fi
fi

if [ "${1:-}" = "--list" ]; then
	for entry in $PACKAGES; do echo "${entry%%:/*}"; done
	exit 0
fi

missing=""
for entry in $PACKAGES; do
	path=/${entry#*:/}
	pkg=${entry%%:/*}
	[ -e "$path" ] || missing="$missing $pkg"
done

[ -z "$missing" ] && exit 0
if [ "${1:-}" = "--check" ]; then
	echo "missing Debian packages:$missing" >&2
	exit 1
fi

echo "sluice: installing missing Debian packages:$missing" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || {
		echo "sluice: need root (or sudo) to install:$missing" >&2
		exit 1
	}
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
# An empty or stale package list makes installs fail; refresh it first.
$SUDO apt-get update -q || { echo "sluice: apt-get update failed" >&2; exit 1; }
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing || {
	echo "sluice: apt-get install$missing failed" >&2
	exit 1
}
for entry in $PACKAGES; do
	path=/${entry#*:/}
	[ -e "$path" ] || { echo "sluice: ${entry%%:/*} still missing after install" >&2; exit 1; }
done
