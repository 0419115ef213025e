# kgate top-level build. Each room contributes a module.mk fragment; this file holds the shared
# flags, the pattern rules and the user-facing targets (all, test, demo, sanitize, bench, install).
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
LIBEXECDIR ?= $(LIBDIR)/kgate
PLUGINDIR ?= $(LIBDIR)/kgate/plugins
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share/kgate
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)/kgate
MANDIR ?= $(PREFIX)/share/man

CC ?= cc
BUILD ?= build
SAN ?=
PKGS := libseccomp libcap yaml-0.1 jansson libcurl libprotobuf-c
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka)

# Paths the binary falls back to when it runs from the build tree are baked in as the installed
# ones; KGATE_HOME or the location of /proc/self/exe overrides them at run time.
DEFS := -D_GNU_SOURCE -DKG_LIBEXECDIR='"$(LIBEXECDIR)"' -DKG_PLUGINDIR='"$(PLUGINDIR)"' \
	-DKG_DATADIR='"$(DATADIR)"' -DKG_SYSCONFDIR='"$(SYSCONFDIR)"' -DKG_INCLUDEDIR='"$(INCLUDEDIR)"'
WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter \
	-Wno-format-truncation
OPT ?= -O2 -g
CFLAGS ?=
KG_CFLAGS := -std=c11 $(OPT) $(WARN) $(DEFS) -fPIC -fstack-protector-strong -D_FORTIFY_SOURCE=2 \
	-Iinclude -Icommon -I. -I$(BUILD) $(PKG_CFLAGS) $(SAN) $(CFLAGS)
ifneq ($(SAN),)
KG_CFLAGS := $(filter-out -D_FORTIFY_SOURCE=2,$(KG_CFLAGS)) -O1 -fno-omit-frame-pointer
endif
ifneq ($(SANDBOX_LEARN),)
KG_CFLAGS += -DKG_SANDBOX_LEARN
endif
KG_LDFLAGS := $(SAN) -Wl,-z,relro,-z,now -Wl,--as-needed $(LDFLAGS)

all:

# Library names are fixed here, before the rooms' fragments, so that any fragment can depend on
# any library whatever the include order.
COMMON_LIB := $(BUILD)/libkgcommon.a
SANDBOX_LIB := $(BUILD)/libkgsandbox.a
POLICY_LIB := $(BUILD)/libkgpolicy.a
VERIFIER_LIB := $(BUILD)/libkgverifier.a
DEVICE_LIB := $(BUILD)/libkgdevice.a
KG_CORE_LIBS := $(VERIFIER_LIB) $(DEVICE_LIB) $(POLICY_LIB) $(SANDBOX_LIB) $(COMMON_LIB)

# Rooms add sources and targets here.
include $(sort $(wildcard */module.mk))
# The fuzz harnesses, their replay programs (part of `make tests`) and `make fuzz`.
include tests/fuzz/fuzz.mk

V ?= 0
Q := $(if $(filter 1,$(V)),,@)
$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(KG_CFLAGS) -MMD -MP -c $< -o $@

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

.PHONY: all deps test tests demo sanitize bench clean install test-gpu cppcheck fuzz fuzz-run

deps:
	@scripts/deps.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh $(BUILD)

test: deps
	@$(MAKE) --no-print-directory all tests
	@scripts/run-tests.sh $(BUILD)

sanitize: deps
	@$(MAKE) --no-print-directory BUILD=build-san SAN='-fsanitize=address,undefined -fno-sanitize-recover=all' all tests
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 KGATE_SANITIZE=1 \
		scripts/run-tests.sh build-san

cppcheck:
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
		--suppress=missingIncludeSystem $(DEFS) -Iinclude -Icommon -I. -I$(BUILD) $(sort $(CPPCHECK_DIRS))

clean:
	rm -rf $(BUILD) build-san $(FUZZ_BUILD)

# The rooms install their own files: install-kgate (packaging/module.mk: programs, headers, tasks,
# examples, policies, man pages) and install-agents (plugins/module.mk). `make deb`, `make rpm` too.
install: all

# Test and bench programs: rooms append to TEST_BINS and BENCH_BINS (paths under $(BUILD)).
tests: $(TEST_BINS)
bench: deps
	@$(MAKE) --no-print-directory all $(BENCH_BINS)
	@scripts/bench.sh $(BUILD)
.SECONDARY:

# The CUDA suite; run it on a GPU machine (through the device tool in development). With
# KGATE_PREBUILT=1 it uses the binaries already in $(BUILD) (a GPU host without the -dev packages).
test-gpu:
ifeq ($(KGATE_PREBUILT),)
	@scripts/deps.sh
	@$(MAKE) --no-print-directory all
endif
	@KGATE_HOME=$(CURDIR) KGATE_BUILD=$(BUILD) sh tests/gpu/run.sh
