# fuzz: AFL++ harnesses (tests/fuzz/fuzz_*.c) for the task manifest, the policy, the protobuf
# messages and frames that come from agent plugins, and the LLM answer extraction. Built plainly
# they are replay programs, $(BUILD)/tests/bin/fuzz-*, that `make test` runs over the seed corpus
# (tests/fuzz/corpus/NAME) on every machine; `make fuzz` builds them with afl-cc (Debian's afl++,
# needed only here) into $(FUZZ_BUILD)/fuzz/, and `make fuzz-run` runs each for FUZZ_SECONDS and
# fails on a crash (CI does).
FUZZ_NAMES := task policy proto extract
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 20
# afl-cc is clang here, which warns where gcc does not (libseccomp's macros): the gcc build keeps
# -Werror for the project's code; the instrumented copy only has to build
FUZZ_CFLAGS ?= -w
FUZZ_LIBS := $(BUILD)/libkgllm.a $(BUILD)/libkgplugins.a $(BUILD)/libkgproto.a $(KG_CORE_LIBS)
FUZZ_OBJS := $(FUZZ_NAMES:%=$(BUILD)/tests/fuzz/fuzz_%.o)
$(FUZZ_OBJS): | $(BUILD)/proto/kgate.pb-c.h
FUZZ_LINK = $(CC) $(KG_LDFLAGS) -o $@ $< $(FUZZ_LIBS) $(PKG_LIBS) -ldl -lpthread -lm
$(BUILD)/tests/bin/fuzz-%: $(BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_LIBS)
	@mkdir -p $(dir $@)
	$(FUZZ_LINK)
$(BUILD)/fuzz/%: $(BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_LIBS)
	@mkdir -p $(dir $@)
	$(FUZZ_LINK)
TEST_BINS += $(FUZZ_NAMES:%=$(BUILD)/tests/bin/fuzz-%)
CPPCHECK_DIRS += tests/fuzz

.PHONY: fuzz fuzz-run fuzz-bins
fuzz-bins: $(FUZZ_NAMES:%=$(BUILD)/fuzz/%)
fuzz:
	@command -v afl-cc >/dev/null 2>&1 || { \
		echo "make fuzz: afl-cc not found. Install AFL++ (Debian's afl++ package):" >&2; \
		echo "  sudo apt-get install afl++     (or, as root: scripts/deps.sh --fuzz)" >&2; exit 1; }
	@AFL_QUIET=1 $(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=afl-cc CFLAGS="$(FUZZ_CFLAGS)" fuzz-bins
	@echo "AFL++ harnesses in $(FUZZ_BUILD)/fuzz/: $(FUZZ_NAMES)"
	@echo "  e.g. afl-fuzz -i tests/fuzz/corpus/task -o fuzz-out -- $(FUZZ_BUILD)/fuzz/task"
	@echo "  or all of them for FUZZ_SECONDS each: make fuzz-run FUZZ_SECONDS=$(FUZZ_SECONDS)"
fuzz-run: fuzz
	@sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_NAMES)
