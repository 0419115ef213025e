# agents: the search loop (libkgagents.a, linked into kgate through CLI_EXTRA_LIBS) and the
# tests of the agents and plugins rooms (programs in tests/agents/, named agents-* so that
# `scripts/run-tests.sh BUILD agents` selects them). Proto and plugin names are spelled out:
# their fragments are included after this one.
AGENTS_SRCS := agents/search.c agents/propose.c agents/retime.c agents/history.c agents/workers.c \
	agents/feedback.c agents/results.c \
	agents/finalists.c agents/slurm.c agents/html.c \
	agents/cmd_search.c
AGENTS_LIB := $(BUILD)/libkgagents.a
$(AGENTS_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/cli/extra.o: | $(BUILD)/proto/kgate.pb-c.h
$(AGENTS_LIB): $(AGENTS_SRCS:%.c=$(BUILD)/%.o)
	rm -f $@ && $(AR) rcs $@ $^ # afresh: a moved or deleted source must not linger as a member
CLI_EXTRA_LIBS += $(AGENTS_LIB) $(BUILD)/libkgplugins.a $(BUILD)/libkgproto.a
CPPCHECK_DIRS += agents

# ---- tests of the agents and plugins rooms ----
AGENTS_TEST_SRCS := $(wildcard tests/agents/test_*.c)
AGENTS_TEST_BINS := $(AGENTS_TEST_SRCS:tests/agents/test_%.c=$(BUILD)/tests/bin/agents-%)
AGENTS_TEST_LIBS := $(AGENTS_LIB) $(BUILD)/libkgplugins.a $(BUILD)/libkgllm.a $(BUILD)/libkgtune.a $(BUILD)/libkgproto.a \
	$(KG_CORE_LIBS)
$(AGENTS_TEST_SRCS:%.c=$(BUILD)/%.o): | $(BUILD)/proto/kgate.pb-c.h
$(BUILD)/tests/bin/agents-%: $(BUILD)/tests/agents/test_%.o $(AGENTS_TEST_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(KG_LDFLAGS) -o $@ $< $(AGENTS_TEST_LIBS) $(PKG_LIBS) $(CMOCKA_LIBS) \
		-ldl -lpthread -lm

# Test plugins: one well-formed (faulty: crashes, hangs, fails on request) and three broken ones
# for the loader, all from tests/agents/plugin_test.c.
TEST_PLUGIN_DIR := $(BUILD)/tests/plugins
TEST_PLUGINS := $(TEST_PLUGIN_DIR)/faulty.so $(TEST_PLUGIN_DIR)/badmajor.so $(TEST_PLUGIN_DIR)/nosymbol.so \
	$(TEST_PLUGIN_DIR)/nopropose.so
TEST_PLUGIN_DEFS_faulty :=
TEST_PLUGIN_DEFS_badmajor := -DBAD_MAJOR
TEST_PLUGIN_DEFS_nosymbol := -DNO_SYMBOL
TEST_PLUGIN_DEFS_nopropose := -DNO_PROPOSE
$(TEST_PLUGIN_DIR)/%.so: tests/agents/plugin_test.c $(BUILD)/libkgproto.a $(COMMON_LIB) | $(BUILD)/proto/kgate.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(KG_CFLAGS) $(TEST_PLUGIN_DEFS_$*) -shared $(KG_LDFLAGS) -o $@ $< $(BUILD)/libkgproto.a $(COMMON_LIB) \
		-Wl,--as-needed $(PKG_LIBS)
$(BUILD)/tests/bin/agents-plugins: $(TEST_PLUGINS) $(BUILD)/plugins/replay.so
TEST_BINS += $(AGENTS_TEST_BINS) $(TEST_PLUGINS)
CPPCHECK_DIRS += $(AGENTS_TEST_SRCS) tests/agents/plugin_test.c
