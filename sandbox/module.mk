# sandbox: the isolation layer every untrusted step runs in (namespaces, mounts, Landlock, seccomp,
# capabilities, limits). Library, its tests (tests/sandbox) and its bench (bench/sandbox.mk).
SANDBOX_SRCS := $(wildcard sandbox/*.c)
SANDBOX_LIB := $(BUILD)/libkgsandbox.a
$(SANDBOX_LIB): $(SANDBOX_SRCS:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^ # afresh: a moved or deleted source must not linger as a member
all: $(SANDBOX_LIB)
CPPCHECK_DIRS += sandbox

SANDBOX_LINK := $(SANDBOX_LIB) $(COMMON_LIB)
# the helper runs inside the sandbox: link only what it needs, so that it loads fast
SANDBOX_HELPER_LIBS := $(shell pkg-config --libs libseccomp libcap 2>/dev/null || echo -lseccomp -lcap)
SANDBOX_HELPERS := $(BUILD)/tests/helpers/try-syscall $(BUILD)/tests/helpers/cuda-probe

$(SANDBOX_HELPERS): $(BUILD)/tests/helpers/%: $(BUILD)/tests/sandbox/%.o $(SANDBOX_LINK)
	@mkdir -p $(dir $@)
	$(CC) $(KG_LDFLAGS) $^ -o $@ $(SANDBOX_HELPER_LIBS) -ldl -lm

$(BUILD)/tests/bin/sandbox_%: $(BUILD)/tests/sandbox/sandbox_%.o $(SANDBOX_LINK) $(SANDBOX_HELPERS)
	@mkdir -p $(dir $@)
	$(CC) $(KG_LDFLAGS) $(filter %.o %.a,$^) -o $@ $(CMOCKA_LIBS) $(PKG_LIBS) -lm

TEST_BINS += $(BUILD)/tests/bin/sandbox_api $(BUILD)/tests/bin/sandbox_syscalls $(BUILD)/tests/bin/sandbox_spec \
	$(BUILD)/tests/bin/sandbox_cuda $(BUILD)/tests/bin/sandbox_pyfilter
# the run filter a Python runner applies itself: the library it loads, beside kgate-run
$(BUILD)/tests/bin/sandbox_pyfilter: $(BUILD)/libkgate-filter.so

include bench/sandbox.mk
