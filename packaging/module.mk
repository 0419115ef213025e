# packaging: `make install` of the core files (install-kgate; the plugins room adds install-agents),
# `make deb` and `make rpm` (into dist/, from a PREFIX=/usr build in $(PKG_BUILD), never in build/),
# and the man pages kgate(1), kgate-policy(5), kgate-task(5).

# The installed paths are compiled into the binaries (DEFS), but make does not see a changed -D:
# the objects that use them depend on a stamp rewritten whenever the paths differ from the last
# build in $(BUILD), so `make install PREFIX=...` never installs binaries that look elsewhere.
KG_PATHS := $(LIBEXECDIR) $(PLUGINDIR) $(DATADIR) $(SYSCONFDIR) $(INCLUDEDIR)
KG_PATHS_STAMP := $(BUILD)/paths.stamp
ifneq ($(file <$(KG_PATHS_STAMP)),$(KG_PATHS))
$(shell mkdir -p $(BUILD))
$(file >$(KG_PATHS_STAMP),$(KG_PATHS))
endif
KG_PATHS_SRCS := $(shell grep -rlE 'KG_(LIBEXEC|DATA|SYSCONF|INCLUDE|PLUGIN)DIR' --include='*.c' \
	agents cli common plugins policy runner sandbox verifier 2>/dev/null)
$(KG_PATHS_SRCS:%.c=$(BUILD)/%.o): $(KG_PATHS_STAMP)

# ---- make install: binaries, the candidate header, tasks, examples, policies, man pages ----
# The runtime copy of kernel.h under $(DATADIR)/include lets kgate compile candidates without the
# -dev package; $(INCLUDEDIR)/kgate gets the public headers but agent.h, which install-agents
# copies (two copies at once race under make -j). Examples are the candidate sources; the vendor
# agent is install-agents'.
KG_INST_HEADERS := $(filter-out include/kgate/agent.h,$(wildcard include/kgate/*.h))
KG_INST_TASKS := $(wildcard tasks/*/task.yaml tasks/*/reference.c tasks/*/reference.cu tasks/*/baseline.py)
KG_INST_EXAMPLES := $(filter-out examples/vendor-agent/%,$(wildcard examples/*/*.c examples/*/*.cu \
	examples/*/*/*.c examples/*/*/*.cu))
KG_MAN1 := packaging/man/kgate.1
KG_MAN5 := packaging/man/kgate-policy.5 packaging/man/kgate-task.5

.PHONY: install-kgate deb rpm
install: install-kgate
install-kgate: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(INCLUDEDIR)/kgate \
		$(DESTDIR)$(DATADIR)/include/kgate $(DESTDIR)$(SYSCONFDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5
	install -m 0755 $(KGATE_BIN) $(DESTDIR)$(BINDIR)/kgate
	install -m 0755 $(RUNNER_BIN) $(DESTDIR)$(LIBEXECDIR)/kgate-run
	install -m 0755 $(DEVICE_BIN) $(DESTDIR)$(LIBEXECDIR)/kgate-device
	install -m 0644 runner/torch_runner.py $(DESTDIR)$(LIBEXECDIR)/torch_runner.py
	install -m 0644 runner/torch_build.py $(DESTDIR)$(LIBEXECDIR)/torch_build.py
	install -m 0644 runner/torch_derive.py $(DESTDIR)$(LIBEXECDIR)/torch_derive.py
	install -m 0644 runner/torch_device.py $(DESTDIR)$(LIBEXECDIR)/torch_device.py
	install -m 0755 $(FILTER_LIB) $(DESTDIR)$(LIBEXECDIR)/libkgate-filter.so
	install -m 0644 $(KG_INST_HEADERS) $(DESTDIR)$(INCLUDEDIR)/kgate/
	install -m 0644 include/kgate/kernel.h $(DESTDIR)$(DATADIR)/include/kgate/
	install -m 0644 policy/default.yaml policy/strict.yaml policy/ci.yaml $(DESTDIR)$(SYSCONFDIR)/
	for f in $(KG_INST_TASKS) $(KG_INST_EXAMPLES); do install -D -m 0644 $$f $(DESTDIR)$(DATADIR)/$$f || exit 1; done
	install -m 0644 $(KG_MAN1) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(KG_MAN5) $(DESTDIR)$(MANDIR)/man5/
	$(MAKE) --no-print-directory install-pc

# kgate.pc (kgate-dev): the agent ABI's paths for vendors' Makefiles (examples/vendor-agent). Only
# text: `make install-pc PREFIX=...` writes it without building anything.
PKGCONFIGDIR ?= $(PREFIX)/share/pkgconfig
.PHONY: install-pc
install-pc:
	install -d $(DESTDIR)$(PKGCONFIGDIR)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' -e 's|@DATADIR@|$(DATADIR)|' \
		-e 's|@PLUGINDIR@|$(PLUGINDIR)|' \
		-e "s|@VERSION@|$$(sed -n 's/^#define KG_VERSION \"\(.*\)\"$$/\1/p' cli/main.c)|" \
		packaging/kgate.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/kgate.pc
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/kgate.pc

# ---- packages ----
# The scripts do the work (the package tests call them too; they build in $(PKG_BUILD) with the FHS
# paths); these targets first install the build and lint tools.
PKG_BUILD ?= build-pkg
deb:
	@scripts/deps.sh --packaging
	@MAKEFLAGS= packaging/build-deb.sh $(PKG_BUILD) dist
rpm:
	@scripts/deps.sh --packaging
	@MAKEFLAGS= packaging/build-rpm.sh $(PKG_BUILD) dist
