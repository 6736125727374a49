#!/bin/sh
# Build the Debian package: scripts/mkdeb.sh BUILD_DIR OUT_DIR
#   BUILD_DIR  where the package's own build goes (compiled apart from the
#              developer build: Debian's hardening flags, PREFIX=/usr)
#   OUT_DIR    where sluice_VERSION_ARCH.deb is written
# The tree staged for the package is `make install` with Debian's paths; then the
# binaries are stripped, the man pages and changelog compressed, and the control
# file, conffiles, md5sums and maintainer scripts (dist/deb/) added.  Run by
# `make deb`, which runs lintian on the result.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$1" "$2"
build=$(cd "$1" && pwd)
out=$(cd "$2" && pwd)
version=${VERSION:-$(cat "$top/VERSION")}
arch=$(dpkg --print-architecture)
stage=$build/stage
deb=$out/sluice_${version}_$arch.deb

# Debian's hardening (stack protector, fortify, relro, bindnow) on top of -Wall
# -Wextra -Werror; the package's build is separate so the flags never mix.
flags=$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CFLAGS)
cppflags=$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get CPPFLAGS)
ldflags=$(DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --get LDFLAGS)
# A make above this one (make asan, say) passes its settings down through
# MAKEFLAGS: the package is built with none of them (no sanitizers).
pkgmake() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$top" -s BUILD="$build/obj" SAN= VERSION="$version" "$@"; }
pkgmake CFLAGS="$flags $cppflags" LDFLAGS="$ldflags" all
rm -rf "$stage"
pkgmake DESTDIR="$stage" PREFIX=/usr SYSTEMDDIR=/lib/systemd/system install

# Stripped: the package carries no debugging symbols (the build tree keeps them).
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
	"$stage/usr/bin/sluice" "$stage/usr/bin/sluiced" "$stage/usr/lib/sluice/libsluice.so"
gzip -9n "$stage"/usr/share/man/man*/*
doc=$stage/usr/share/doc/sluice
# The copyright file: its header, then the licence's words from LICENSE (the one
# source of them), then inih's notice, as the shim carries inih.
{
	cat "$top/dist/deb/copyright"
	sed -n '/^Redistribution/,$p' "$top/LICENSE" | sed -e 's/^$/./' -e 's/^/ /'
	printf '\nLicense: BSD-3-Clause\n'
	sed -n '/^License: BSD-3-Clause/,/^$/{/^License:/d;/^$/d;p}' /usr/share/doc/libinih-dev/copyright |
		sed -n '/Redistribution/,$p'
} >"$doc/copyright"
chmod 0644 "$doc/copyright"
# A native package's changelog: this version, from the commit it was built at.
{
	printf 'sluice (%s) unstable; urgency=medium\n\n' "$version"
	printf '  * Built from %s.\n\n' "$(git -C "$top" describe --always --dirty 2>/dev/null || echo 'a source tree')"
	printf ' -- sluice authors <sluice@example.org>  %s\n' "$(date -R)"
} | gzip -9n >"$doc/changelog.gz"
gzip -9n "$doc/README.md" "$doc"/docs/*.md
# Debian's copyright file is the licence's place in a package (LICENSE's words are in it).
rm -f "$doc/LICENSE"
find "$stage" -type d -exec chmod 0755 {} +

# Dependencies of the binaries, as dpkg-shlibdeps finds them (it wants a
# debian/control to read, so it runs in a scratch directory).
mkdir -p "$build/shlibs/debian"
printf 'Source: sluice\n\nPackage: sluice\nArchitecture: any\n' >"$build/shlibs/debian/control"
depends=$(cd "$build/shlibs" && dpkg-shlibdeps -O \
	"$stage/usr/bin/sluice" "$stage/usr/bin/sluiced" "$stage/usr/lib/sluice/libsluice.so" |
	sed -n 's/^shlibs:Depends=//p')

install -d -m 0755 "$stage/DEBIAN"
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@DEPENDS@|$depends|" \
	-e "s|@SIZE@|$(du -sk --exclude=DEBIAN "$stage" | cut -f1)|" \
	"$top/dist/deb/control.in" >"$stage/DEBIAN/control"
printf '/etc/sluice/sluice.ini\n' >"$stage/DEBIAN/conffiles"
install -m 0755 "$top/dist/deb/postinst" "$top/dist/deb/prerm" "$stage/DEBIAN/"
install -m 0755 "$top/dist/deb/postrm" "$stage/DEBIAN/postrm"
chmod 0755 "$stage/DEBIAN/postrm"
(cd "$stage" && find . -path ./DEBIAN -prune -o -path ./etc -prune -o -type f -print |
	sed 's|^\./||' | LC_ALL=C sort | xargs md5sum) >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles" "$stage/DEBIAN/md5sums"

mkdir -p "$out"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
