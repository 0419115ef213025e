# cli: the kgate binary.
CLI_SRCS := cli/main.c cli/extra.c
KGATE_BIN := $(BUILD)/kgate
# Libraries in dependency order: the CLI and agents on top, the verifier, policy, sandbox, common.
KG_CORE_LIBS = $(VERIFIER_LIB) $(POLICY_LIB) $(SANDBOX_LIB) $(COMMON_LIB)
$(KGATE_BIN): $(CLI_SRCS:%.c=$(BUILD)/%.o) $(CLI_EXTRA_LIBS) $(KG_CORE_LIBS)
	$(CC) $(KG_LDFLAGS) -o $@ $(CLI_SRCS:%.c=$(BUILD)/%.o) -Wl,--start-group $(CLI_EXTRA_LIBS) $(KG_CORE_LIBS) -Wl,--end-group \
		$(PKG_LIBS) -ldl -lpthread -lm
all: $(KGATE_BIN)
CPPCHECK_DIRS += cli
