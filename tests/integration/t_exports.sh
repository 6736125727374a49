#!/usr/bin/env bash
# libsluice.so exports the interposed calls and nothing else, links only libc (and
# what glibc splits off), and carries inih inside it, hidden.
. "$(dirname "$0")/lib.sh"

expected="close close_range closefrom connect dup dup2 dup3 epoll_ctl epoll_pwait epoll_pwait2 epoll_wait execl execle execlp execv execve execveat execvp execvpe fclose fcntl fcntl64 fexecve getaddrinfo gethostbyname gethostbyname2 gethostbyname2_r gethostbyname_r getsockopt poll posix_spawn posix_spawnp ppoll pselect read readv recv recvfrom recvmsg select send sendfile sendfile64 sendmmsg sendmsg sendto shutdown socket write writev"
got=$(nm -D --defined-only "$SHIM" | awk '$2 ~ /^[TWDBV]$/ { print $3 }' | sort | tr '\n' ' ' | sed 's/ $//')
[ "$got" = "$expected" ] || fail "libsluice.so exports: $got (expected: $expected)"
if readelf -d "$SHIM" | grep NEEDED | grep -v -E 'libc\.so|libdl\.so|libpthread\.so|ld-linux|libasan|libubsan' ; then
	fail "libsluice.so needs more than libc"
fi
nm -D "$SHIM" | grep -q ini_parse && fail "inih symbols leak from libsluice.so"
nm "$SHIM" 2>/dev/null | grep -q ini_parse_stream || true
note "exports: $got"
