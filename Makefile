# sluice - one plain, non-recursive Makefile.
#
#   make            build build/libsluice.so, build/sluiced, build/sluice
#   make run        the demo: several processes' connections released at a fixed rate
#                   (PLOT=FILE.png: also a picture of the arrivals against the schedule)
#   make unit       the cmocka unit tests alone: a contributor's loop, under a minute
#   make check      unit, and the integration tests that judge no timing, in parallel
#   make test       every test (what .ci/run runs; docs/developing.md says which when)
#   make bench      figures: admission cost, shim overhead, release error
#   make asan       everything built with AddressSanitizer + UBSan, then the tests
#   make chaos      the chaos suite at full size (kill storms, restarts, reloads, scribbles),
#                   then overloaded with 2,000 processes, keyed, and a fleet whose
#                   Sentinel master hangs
#   make cross      build for arm64 (Debian's cross compiler), unit tests under qemu-user
#   make fuzz       libFuzzer on the config, pattern, first-write, response and HTTP/2 parsers (clang)
#   make install    PREFIX=/usr/local DESTDIR=
#   V=1             print the full compiler commands (the build prints one line a step)
#   make deb        a Debian package, build/sluice_VERSION_ARCH.deb (lintian-checked)
#
# Each installs the missing Debian packages it needs through scripts/deps.sh: make
# and make run only what building and the demo need (libev, inih, hiredis, a
# compiler, python3, curl); the tests, bench, chaos, fuzz and deb their own tools.

PREFIX ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= /etc
SYSTEMDDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
BUILD ?= build
# One version for the programs and the package: VERSION at the top of the tree.
VERSION := $(shell cat VERSION)
CC ?= cc
CFLAGS ?= -O2 -g
LDFLAGS ?=

SANITIZERS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
SAN_FLAGS = $(if $(SAN),$(SANITIZERS))
# ASan must be the first library of a process, so an ASan shim would need libasan
# preloaded into every host program (curl deadlocks in setlocale that way).  The
# sanitized shim of `make asan` therefore carries UBSan only, which loads as a plain
# dependency; the core it shares is covered by ASan through the unit tests, and
# libsluice-asan.so (built too) is exercised by tests that preload libasan into
# python3 (tests/integration/t_asan_shim.sh).
SHIM_SAN_FLAGS = $(if $(SAN),-fsanitize=undefined -fno-sanitize-recover=undefined)

# A quiet build, as the kernel's and Redis's: one line a step ("CC src/shim/held.c");
# V=1 prints the full commands instead; make -s prints neither.
ifeq ($(V),1)
quiet =
else ifneq ($(findstring s,$(firstword -$(MAKEFLAGS))),)
quiet =
else
quiet = @printf '  %-7s %s\n' '$(1)' '$(2)';
endif

# Evaluated when a recipe runs, so after scripts/deps.sh has installed the packages.
INIH_CFLAGS = $(shell pkg-config --cflags inih 2>/dev/null)
INIH_LIBS = $(shell pkg-config --libs inih 2>/dev/null || echo -linih)
EV_LIBS = $(shell pkg-config --libs libev 2>/dev/null || echo -lev)
HIREDIS_LIBS = $(shell pkg-config --libs hiredis 2>/dev/null || echo -lhiredis)
CMOCKA_CFLAGS = $(shell pkg-config --cflags cmocka 2>/dev/null)
CMOCKA_LIBS = $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka)

# Core objects go into the shim too: position independent, hidden by default.
BASE_CFLAGS = -std=gnu11 -Wall -Wextra -Werror -Wno-format-truncation -fPIC -fvisibility=hidden \
	-D_GNU_SOURCE -Iinclude $(INIH_CFLAGS)
SL_CFLAGS = $(BASE_CFLAGS) $(SAN_FLAGS) -I$(BUILD)/gen

# The layers, bottom up (docs/design.md, "Layers"; scripts/layers.sh checks them):
# src/proto, the readers of what goes over the wire (HTTP/1, HTTP/2, TLS's first
# bytes, answers, DNS messages); src/core, the admission engine that the shim, the
# daemon and the CLI all use; src/progs, what only the two programs use (printing,
# logging sinks, the control client).  The shim never links progs, and links with
# -z defs, so a core function that starts to call into it fails to build rather
# than failing in a host program at start.
PROTO_SRC = $(wildcard src/proto/*.c)
CORE_SRC = $(wildcard src/core/*.c)
PROGS_SRC = $(wildcard src/progs/*.c)
# DNS messages are read by the seccomp supervisor's relay alone: the shim is not given them.
SHIM_CORE_SRC = $(CORE_SRC) $(filter-out src/proto/dnsmsg.c,$(PROTO_SRC))
# Every source is found, not listed: a file in src/shim is the shim's, in
# src/daemon the daemon's (sluiced.c is its main; the CLI links the rest, for
# `sluice check`'s probe), in src/cli the CLI's, in bench/ a bench program.
SHIM_SRC = $(wildcard src/shim/*.c)
SLUICED_SRC = src/daemon/sluiced.c
DAEMON_SRC = $(filter-out $(SLUICED_SRC),$(wildcard src/daemon/*.c))
CLI_SRC = $(wildcard src/cli/*.c)
# The seccomp supervisor: its own library, which `sluice` links.
SUPERVISOR_SRC = $(wildcard src/supervisor/*.c)
# Every tests/unit/test_MODULE.c is a unit test of a src/*/MODULE.c, found here.
UNIT_TESTS = $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_*.c))
BENCH_SRC = $(wildcard bench/*.c)

obj = $(patsubst src/%.c,$(BUILD)/obj/%.o,$(1))
PROTO_OBJ = $(call obj,$(PROTO_SRC))
CORE_OBJ = $(call obj,$(CORE_SRC))
PROGS_OBJ = $(call obj,$(PROGS_SRC))
# The shim's objects, the core's included, are compiled separately (shim-obj/) so a
# sanitized build can give them their own sanitizer flags.
shim_obj = $(patsubst src/%.c,$(BUILD)/shim-obj/%.o,$(1))
SHIM_OBJ = $(call shim_obj,$(SHIM_SRC) $(SHIM_CORE_SRC))
SHIM_ASAN_OBJ = $(patsubst src/%.c,$(BUILD)/shim-asan-obj/%.o,$(SHIM_SRC) $(SHIM_CORE_SRC))
DAEMON_OBJ = $(call obj,$(DAEMON_SRC))

all: $(BUILD)/libsluice.so $(BUILD)/sluiced $(BUILD)/sluice $(BUILD)/man/sluice.ini.5 $(BUILD)/man/sluice.1 \
	$(BUILD)/man/sluiced.1 \
	$(if $(SAN),$(BUILD)/libsluice-asan.so)

# sluice.ini(5) is docs/config.md, so the page and the reference never differ.
$(BUILD)/man/sluice.ini.5: docs/config.md scripts/md2man.py | deps
	@mkdir -p $(dir $@)
	$(call quiet,MAN,$@)python3 scripts/md2man.py docs/config.md sluice.ini 5 "the configuration of sluice and sluiced" \
		"sluice(1)" "sluiced(1)" >$@.tmp && mv $@.tmp $@

# sluice(1) is docs/commands.md and sluiced(1) docs/sluiced.md, likewise.
$(BUILD)/man/sluice.1: docs/commands.md scripts/md2man.py | deps
	@mkdir -p $(dir $@)
	$(call quiet,MAN,$@)python3 scripts/md2man.py docs/commands.md sluice 1 \
		"slow a program's outbound traffic to one destination" "sluiced(1)" "sluice.ini(5)" >$@.tmp && mv $@.tmp $@

$(BUILD)/man/sluiced.1: docs/sluiced.md scripts/md2man.py | deps
	@mkdir -p $(dir $@)
	$(call quiet,MAN,$@)python3 scripts/md2man.py docs/sluiced.md sluiced 1 \
		"the sluice daemon: shared queues for every shaped process" "sluice(1)" "sluice.ini(5)" >$@.tmp && mv $@.tmp $@

deps:
	@scripts/deps.sh build

unit-deps: | deps
	@scripts/deps.sh unit

test-deps: | deps
	@scripts/deps.sh test

$(BUILD)/obj/%.o: src/%.c | deps
	@mkdir -p $(dir $@)
	$(call quiet,CC,$<)$(CC) $(SL_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/shim-obj/%.o: src/%.c | deps
	@mkdir -p $(dir $@)
	$(call quiet,CC,$< (shim))$(CC) $(BASE_CFLAGS) $(SHIM_SAN_FLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/shim-asan-obj/%.o: src/%.c | deps
	@mkdir -p $(dir $@)
	$(call quiet,CC,$< (shim ASan))$(CC) $(BASE_CFLAGS) $(SANITIZERS) $(CFLAGS) -MMD -MP -c $< -o $@

# The lease script, compiled into the daemon as a C string.
$(BUILD)/gen/fleet_lua.h: src/daemon/fleet.lua
	@mkdir -p $(dir $@)
	@{ echo '/* Generated from src/daemon/fleet.lua: the script Redis runs for the leases. */'; \
	  echo 'static const char sl_fleet_lua[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; echo ';'; } >$@.tmp && mv $@.tmp $@

$(BUILD)/obj/daemon/fleet.o $(BUILD)/obj/daemon/fleet_probe.o: $(BUILD)/gen/fleet_lua.h

# Made afresh: `ar r` into an old archive would keep a member whose source is gone.
$(BUILD)/libsluiceproto.a: $(PROTO_OBJ)
	$(call quiet,AR,$@)rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/libsluicecore.a: $(CORE_OBJ)
	$(call quiet,AR,$@)rm -f $@ && $(AR) rcs $@ $^

# The daemon's modules, for the unit tests of the ones that are the daemon's alone
# (fleet policy, Redis's answers); the programs link the objects themselves.
$(BUILD)/libsluicedaemon.a: $(DAEMON_OBJ)
	$(call quiet,AR,$@)rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/libsluiceprogs.a: $(PROGS_OBJ)
	$(call quiet,AR,$@)rm -f $@ && $(AR) rcs $@ $^

$(BUILD)/libsluicesupervisor.a: $(call obj,$(SUPERVISOR_SRC))
	$(call quiet,AR,$@)rm -f $@ && $(AR) rcs $@ $^

# Only the hooks are exported: the version script is generated from the list of
# hooks (src/shim/hooks.def).  inih is linked in statically and hidden.
$(BUILD)/exports.map: src/shim/hooks.def
	@mkdir -p $(dir $@)
	@{ echo '/* Generated from src/shim/hooks.def: the hooks, and nothing else. */'; \
	  echo '{'; echo '	global:'; \
	  $(CC) -E -P -x c -D'SL_HOOK(ret,name,params)=name;' -D'SL_EXPORT_ONLY(name)=name;' $< | \
	  tr -s ' ;\n' '\n' | grep . | sed 's/.*/		&;/'; \
	  echo '	local:'; echo '		*;'; echo '};'; } >$@.tmp && mv $@.tmp $@

SHIM_LINK = -shared -Wl,--version-script=$(BUILD)/exports.map -Wl,--exclude-libs,ALL -Wl,-z,now \
	-Wl,-z,defs

$(BUILD)/libsluice.so: $(SHIM_OBJ) $(BUILD)/exports.map
	$(call quiet,LD,$@)$(CC) $(SHIM_SAN_FLAGS) $(CFLAGS) $(LDFLAGS) $(SHIM_LINK) -o $@ $(SHIM_OBJ) \
		-Wl,-Bstatic -linih -Wl,-Bdynamic -ldl -lpthread

$(BUILD)/libsluice-asan.so: $(SHIM_ASAN_OBJ) $(BUILD)/exports.map
	$(call quiet,LD,$@)$(CC) $(SANITIZERS) $(CFLAGS) $(LDFLAGS) $(SHIM_LINK) -o $@ $(SHIM_ASAN_OBJ) \
		-Wl,-Bstatic -linih -Wl,-Bdynamic -ldl -lpthread

# Only the two mains say the version: they alone are rebuilt when it changes.
$(BUILD)/obj/cli/sluice.o $(BUILD)/obj/daemon/sluiced.o: VERSION
$(BUILD)/obj/cli/sluice.o $(BUILD)/obj/daemon/sluiced.o: SL_CFLAGS += -DSL_VERSION='"$(VERSION)"'

$(BUILD)/sluiced: $(call obj,$(SLUICED_SRC)) $(DAEMON_OBJ) $(BUILD)/libsluiceprogs.a $(BUILD)/libsluicecore.a \
		$(BUILD)/libsluiceproto.a
	$(call quiet,LD,$@)$(CC) $(SAN_FLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(HIREDIS_LIBS) $(EV_LIBS) $(INIH_LIBS)

$(BUILD)/sluice: $(call obj,$(CLI_SRC)) $(DAEMON_OBJ) $(BUILD)/libsluicesupervisor.a $(BUILD)/libsluiceprogs.a \
		$(BUILD)/libsluicecore.a $(BUILD)/libsluiceproto.a
	$(call quiet,LD,$@)$(CC) $(SAN_FLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(HIREDIS_LIBS) $(EV_LIBS) $(INIH_LIBS)

UNIT_LIBS = $(BUILD)/libsluicedaemon.a $(BUILD)/libsluiceprogs.a $(BUILD)/libsluicecore.a $(BUILD)/libsluiceproto.a
$(BUILD)/tests/%: tests/unit/%.c $(UNIT_LIBS) | unit-deps
	@mkdir -p $(dir $@)
	$(call quiet,LD,$@)$(CC) $(SL_CFLAGS) $(CMOCKA_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(UNIT_LIBS) \
		$(CMOCKA_LIBS) $(INIH_LIBS) $(TEST_LIBS_$*)

# The fleet policy's test runs fleet.lua in a real redis-server through hiredis.
TEST_LIBS_test_fleetpolicy = $(HIREDIS_LIBS)
$(BUILD)/tests/test_fleetpolicy: $(BUILD)/gen/fleet_lua.h

# A bench program measures modules of any layer (admit_bench a quota pass, the daemon's).
$(BUILD)/bench/%: bench/%.c $(UNIT_LIBS) | deps
	@mkdir -p $(dir $@)
	$(call quiet,LD,$@)$(CC) $(SL_CFLAGS) $(CFLAGS) $(LDFLAGS) -pthread -o $@ $< $(UNIT_LIBS) $(INIH_LIBS)

UNIT_BINS = $(addprefix $(BUILD)/tests/,$(UNIT_TESTS))
BENCH_BINS = $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

# The programs no preload reaches, for `sluice run --seccomp`'s tests and bench: a
# static C client (threads, forks, datagrams) and a Go one built with CGO_ENABLED=0.
STATIC_BINS = $(BUILD)/tests/static_client $(BUILD)/tests/goclient $(BUILD)/bench/connect_loop_static
$(BUILD)/bench/connect_loop_static: bench/connect_loop.c src/core/clock.c | deps
	@mkdir -p $(dir $@)
	$(call quiet,LD,$@ (static))$(CC) $(BASE_CFLAGS) -O2 -static -o $@ bench/connect_loop.c src/core/clock.c
$(BUILD)/tests/static_client: tests/integration/helpers/static_client.c | deps
	@mkdir -p $(dir $@)
	$(call quiet,LD,$@ (static))$(CC) -std=gnu11 -Wall -Wextra -Werror -O2 -static -pthread -o $@ $<
$(BUILD)/tests/goclient: tests/integration/helpers/goclient/main.go | test-deps
	@mkdir -p $(dir $@)
	$(call quiet,GO,$@)cd $(dir $<) && CGO_ENABLED=0 GO111MODULE=off GOCACHE=$(abspath $(BUILD))/go-cache \
		GOPATH=$(abspath $(BUILD))/gopath go build -o $(abspath $@) main.go

run: all
	@if [ -n "$(PLOT)" ]; then scripts/deps.sh plot; fi
	@PLOT=$(PLOT) examples/demo.sh $(BUILD)

# The three tiers (tests/run.sh): unit needs cmocka and nothing of the test rig
# (fleet.lua's cases skip with a word where redis-server is missing); check and
# test need the whole rig.
unit: unit-deps $(UNIT_BINS)
	@BUILD=$(BUILD) SAN=$(SAN) SLUICE_REDIS_OPTIONAL=1 tests/run.sh unit

check: test-deps all $(UNIT_BINS) $(BENCH_BINS) $(STATIC_BINS)
	@BUILD=$(BUILD) SAN=$(SAN) tests/run.sh check

test: test-deps all $(UNIT_BINS) $(BENCH_BINS) $(STATIC_BINS)
	@BUILD=$(BUILD) SAN=$(SAN) tests/run.sh test

# The same tests with two busy loops competing for the cores (scripts/busy.sh).
test-busy:
	@scripts/busy.sh 2 $(MAKE) --no-print-directory test

bench: test-deps all $(BENCH_BINS) $(STATIC_BINS)
	@BUILD=$(BUILD) bench/run.sh

asan:
	@$(MAKE) --no-print-directory BUILD=build-asan SAN=1 CFLAGS="-O1 -g" test

# arm64 with Debian's cross compiler: everything built (-Werror as here), then the
# unit tests run under qemu-user (the lock-owner tests too: src/core/proc.c reads
# start times where qemu does not fake them).
CROSS_BUILD = build/arm64
cross:
	@scripts/deps.sh cross
	@$(MAKE) --no-print-directory BUILD=$(CROSS_BUILD) CC=aarch64-linux-gnu-gcc AR=aarch64-linux-gnu-ar \
		all $(addprefix $(CROSS_BUILD)/tests/,$(UNIT_TESTS))
	@file $(CROSS_BUILD)/libsluice.so | grep -q aarch64
	@set -e; for t in $(UNIT_TESTS); do \
		qemu-aarch64 -L / $(CROSS_BUILD)/tests/$$t >$(CROSS_BUILD)/$$t.log 2>&1 || \
			{ cat $(CROSS_BUILD)/$$t.log; echo "cross: $$t failed under qemu-aarch64"; exit 1; }; \
		echo "ok   arm64 $$t: $$(grep -c '^\[       OK \]' $(CROSS_BUILD)/$$t.log) passed"; \
	done
	@# The shim's syscall() on arm64: its variadic arguments and raw calls (syscall.c).
	@aarch64-linux-gnu-gcc -O1 -o $(CROSS_BUILD)/raw_syscalls tests/integration/helpers/raw_syscalls.c
	@qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_PRELOAD=$(CURDIR)/$(CROSS_BUILD)/libsluice.so \
		-E SLUICE_FALLBACK=open $(CROSS_BUILD)/raw_syscalls others && echo "ok   arm64 syscall() through the shim"

# The chaos suite at full size (make test runs it small, as t_chaos).
# Each phase's records are kept for a look when it fails, removed when it passes.
CHAOS_PHASE = d=$$(mktemp -d /tmp/sluice-chaos.XXXXXX) && /usr/bin/python3 tests/chaos/chaos.py $(BUILD) "$$d"
CHAOS_DONE = && rm -rf "$$d" || { echo "make chaos: the phase's records are in $$d"; exit 1; }
chaos: test-deps all $(BENCH_BINS)
	@$(CHAOS_PHASE) --size full $(CHAOS_DONE)
	@$(CHAOS_PHASE) --size overload $(CHAOS_DONE)
	@$(CHAOS_PHASE) --size full --keyed $(CHAOS_DONE)
	@echo "make chaos: a Sentinel master hung (SIGSTOP) mid-run" && \
		out=$$(SENTINEL_KILL=STOP BUILD=$(BUILD) bash tests/integration/t_fleet_sentinel.sh 2>&1) && \
		echo "$$out" | grep "promoted replica" || { echo "$$out" | tail -20; exit 1; }

# Fuzz the config and pattern parsers, the first-write name parser, the HTTP/1
# parser and the shared segment as untrusted input, with libFuzzer (clang),
# FUZZ_SECONDS each.
FUZZ_SECONDS ?= 60
FUZZ_CC = clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE -Iinclude $(INIH_CFLAGS)
fuzz: | test-deps
	@mkdir -p $(BUILD)/fuzz/corpus $(BUILD)/fuzz/corpus-sniff $(BUILD)/fuzz/corpus-response
	$(FUZZ_CC) -o $(BUILD)/fuzz/fuzz_config tests/fuzz/fuzz_config.c $(CORE_SRC) $(PROTO_SRC) $(PROGS_SRC) $(INIH_LIBS)
	$(FUZZ_CC) -o $(BUILD)/fuzz/fuzz_sniff tests/fuzz/fuzz_sniff.c src/proto/sniff.c src/proto/http2.c src/proto/name.c
	$(FUZZ_CC) -o $(BUILD)/fuzz/fuzz_http1 tests/fuzz/fuzz_http1.c src/proto/http1.c
	$(FUZZ_CC) -o $(BUILD)/fuzz/fuzz_response tests/fuzz/fuzz_response.c src/proto/response.c src/proto/http1.c
	$(FUZZ_CC) -o $(BUILD)/fuzz/fuzz_segment tests/fuzz/fuzz_segment.c $(CORE_SRC) $(PROTO_SRC) $(PROGS_SRC) $(INIH_LIBS)
	$(FUZZ_CC) -o $(BUILD)/fuzz/fuzz_dnsmsg tests/fuzz/fuzz_dnsmsg.c src/proto/dnsmsg.c
	$(FUZZ_CC) -o $(BUILD)/fuzz/fuzz_http2 tests/fuzz/fuzz_http2.c src/proto/http2.c src/proto/response.c \
		src/proto/http1.c -lnghttp2
	$(FUZZ_CC) -o $(BUILD)/fuzz/fuzz_redisnode tests/fuzz/fuzz_redisnode.c src/daemon/redisnode.c $(HIREDIS_LIBS)
	cp tests/fuzz/corpus/* $(BUILD)/fuzz/corpus/
	cp tests/fuzz/corpus-sniff/* $(BUILD)/fuzz/corpus-sniff/
	cp tests/fuzz/corpus-response/* $(BUILD)/fuzz/corpus-response/
	$(BUILD)/fuzz/fuzz_config -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(BUILD)/fuzz/corpus
	$(BUILD)/fuzz/fuzz_sniff -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(BUILD)/fuzz/corpus-sniff
	$(BUILD)/fuzz/fuzz_http1 -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(BUILD)/fuzz/corpus-sniff
	$(BUILD)/fuzz/fuzz_response -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(BUILD)/fuzz/corpus-response
	@mkdir -p $(BUILD)/fuzz/corpus-http2
	cp tests/fuzz/corpus-http2/* $(BUILD)/fuzz/corpus-http2/
	$(BUILD)/fuzz/fuzz_http2 -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(BUILD)/fuzz/corpus-http2
	@mkdir -p $(BUILD)/fuzz/corpus-segment
	cp tests/fuzz/corpus-segment/* $(BUILD)/fuzz/corpus-segment/
	$(BUILD)/fuzz/fuzz_segment -max_total_time=$(FUZZ_SECONDS) -max_len=65536 $(BUILD)/fuzz/corpus-segment
	@mkdir -p $(BUILD)/fuzz/corpus-dns
	$(BUILD)/fuzz/fuzz_dnsmsg -max_total_time=$(FUZZ_SECONDS) -max_len=1024 $(BUILD)/fuzz/corpus-dns
	@mkdir -p $(BUILD)/fuzz/corpus-redis
	cp tests/fuzz/corpus-redis/* $(BUILD)/fuzz/corpus-redis/
	$(BUILD)/fuzz/fuzz_redisnode -max_total_time=$(FUZZ_SECONDS) -max_len=4096 $(BUILD)/fuzz/corpus-redis

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/sluice \
		$(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 \
		$(DESTDIR)$(PREFIX)/share/doc/sluice
	install -m 0755 $(BUILD)/sluice $(BUILD)/sluiced $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 $(BUILD)/libsluice.so $(DESTDIR)$(PREFIX)/lib/sluice/
	install -m 0644 $(BUILD)/man/sluice.1 $(BUILD)/man/sluiced.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 $(BUILD)/man/sluice.ini.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 0644 conf/sluice.ini README.md LICENSE $(DESTDIR)$(PREFIX)/share/doc/sluice/
	@# The README's links: the docs beside it (the package gzips them).
	install -d $(DESTDIR)$(PREFIX)/share/doc/sluice/docs
	install -m 0644 docs/*.md $(DESTDIR)$(PREFIX)/share/doc/sluice/docs/
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 0644 dist/bash-completion/sluice $(DESTDIR)$(PREFIX)/share/bash-completion/completions/sluice
	ln -sf sluice $(DESTDIR)$(PREFIX)/share/bash-completion/completions/sluiced
	install -d $(DESTDIR)$(SYSTEMDDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(SYSCONFDIR)/sluice
	sed -e 's|@BINDIR@|$(PREFIX)/bin|g' dist/sluiced.service.in >$(DESTDIR)$(SYSTEMDDIR)/sluiced.service
	install -m 0644 dist/sysusers.conf $(DESTDIR)$(SYSUSERSDIR)/sluice.conf
	install -m 0644 dist/tmpfiles.conf $(DESTDIR)$(TMPFILESDIR)/sluice.conf
	@# The machine's config: the commented sample, set for the service (its queues
	@# for the group sluice) and inert - [sluice] live, every example section
	@# commented out, so nothing is shaped until the operator adds a section; an
	@# existing one is kept.
	test -e $(DESTDIR)$(SYSCONFDIR)/sluice/sluice.ini || \
	  sed -e 's|^;shm_group     = sluice |shm_group      = sluice |' conf/sluice.ini | \
	  scripts/inert-config.awk >$(DESTDIR)$(SYSCONFDIR)/sluice/sluice.ini

# The Debian package, in $(BUILD)/: its own hardened build under $(BUILD)/deb,
# then lintian (errors fail; its findings are printed).
deb-deps: | deps
	@scripts/deps.sh deb

deb: | deb-deps
	@deb=$$(scripts/mkdeb.sh $(BUILD)/deb $(BUILD)) && \
	  lintian --fail-on error $$deb && \
	  echo "built $$deb"

clean:
	rm -rf build build-asan

.PHONY: all deps unit-deps test-deps deb-deps run unit check test test-busy bench asan chaos cross fuzz install deb clean

-include $(shell find $(BUILD) -name '*.d' -type f 2>/dev/null)
