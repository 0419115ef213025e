# plugins: the agent ABI loader and helper process (libkgplugins.a, linked into kgate) and the
# built-in agents, each a shared object in $(BUILD)/plugins/ (installed to $(PLUGINDIR)).
# The proto names are spelled out, not taken from proto/module.mk: it is included after this file.
PLUGINS_CORE_SRCS := plugins/loader.c plugins/frame.c plugins/client.c plugins/host.c
PLUGINS_LIB := $(BUILD)/libkgplugins.a
LLM_SRCS := plugins/llm/extract.c plugins/llm/retry.c plugins/llm/http.c plugins/llm/prompt.c plugins/llm/agent.c
LLM_OBJS := $(LLM_SRCS:%.c=$(BUILD)/%.o)
PLUGIN_NAMES := replay openai anthropic tuner
PLUGIN_SOS := $(PLUGIN_NAMES:%=$(BUILD)/plugins/%.so)
PLUGINS_ALL_OBJS := $(PLUGINS_CORE_SRCS:%.c=$(BUILD)/%.o) $(LLM_OBJS) \
	$(foreach p,$(PLUGIN_NAMES),$(BUILD)/plugins/$(p)/$(p).o) $(BUILD)/plugins/tuner/tune.o
$(PLUGINS_ALL_OBJS): | $(BUILD)/proto/kgate.pb-c.h

$(PLUGINS_LIB): $(PLUGINS_CORE_SRCS:%.c=$(BUILD)/%.o)
	rm -f $@ && $(AR) rcs $@ $^ # afresh: a moved or deleted source must not linger as a member

# Only kg_agent_plugin_v1 is exported (plugins/plugin.map); --as-needed drops the libraries of
# $(PKG_LIBS) a plugin does not use.
PLUGIN_LINK = $(CC) -shared $(KG_LDFLAGS) -Wl,--version-script=plugins/plugin.map -o $@ $(filter %.o,$^) \
	$(BUILD)/libkgproto.a $(COMMON_LIB) -Wl,--as-needed $(PKG_LIBS)
$(BUILD)/plugins/replay.so: $(BUILD)/plugins/replay/replay.o $(BUILD)/libkgproto.a $(COMMON_LIB) plugins/plugin.map
	$(PLUGIN_LINK)
$(BUILD)/plugins/openai.so: $(BUILD)/plugins/openai/openai.o $(LLM_OBJS) $(BUILD)/libkgproto.a $(COMMON_LIB) plugins/plugin.map
	$(PLUGIN_LINK)
$(BUILD)/plugins/anthropic.so: $(BUILD)/plugins/anthropic/anthropic.o $(LLM_OBJS) $(BUILD)/libkgproto.a $(COMMON_LIB) plugins/plugin.map
	$(PLUGIN_LINK)
$(BUILD)/plugins/tuner.so: $(BUILD)/plugins/tuner/tuner.o $(BUILD)/plugins/tuner/tune.o $(BUILD)/libkgproto.a $(COMMON_LIB) \
	plugins/plugin.map
	$(PLUGIN_LINK)

all: $(PLUGIN_SOS)
CPPCHECK_DIRS += plugins

# The LLM helpers and the tuner's core as libraries too, for the unit tests.
$(BUILD)/libkgllm.a: $(LLM_OBJS)
	rm -f $@ && $(AR) rcs $@ $^ # afresh: a moved or deleted source must not linger as a member
$(BUILD)/libkgtune.a: $(BUILD)/plugins/tuner/tune.o
	rm -f $@ && $(AR) rcs $@ $^ # afresh: a moved or deleted source must not linger as a member

# Installed for vendors: the ABI header (the top install copies include/kgate/*.h), the .proto
# they run protoc-c on, the sample vendor agent; for users, the built-in plugins.
.PHONY: install-agents
install: install-agents
install-agents: all
	install -d $(DESTDIR)$(PLUGINDIR) $(DESTDIR)$(DATADIR)/proto $(DESTDIR)$(INCLUDEDIR)/kgate \
		$(DESTDIR)$(DATADIR)/examples/vendor-agent
	install -m 0755 $(PLUGIN_SOS) $(DESTDIR)$(PLUGINDIR)/
	install -m 0644 proto/kgate.proto $(DESTDIR)$(DATADIR)/proto/
	install -m 0644 include/kgate/agent.h $(DESTDIR)$(INCLUDEDIR)/kgate/
	install -m 0644 examples/vendor-agent/acme_agent.c examples/vendor-agent/Makefile \
		examples/vendor-agent/README.md $(DESTDIR)$(DATADIR)/examples/vendor-agent/
