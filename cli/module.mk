# cli: the kgate binary.
CLI_SRCS := cli/main.c cli/commands.c cli/doctor.c cli/tasks.c cli/taskimport.c cli/supervise.c
KGATE_BIN := $(BUILD)/kgate
$(KGATE_BIN): $(CLI_SRCS:%.c=$(BUILD)/%.o) $(CLI_EXTRA_LIBS) $(KG_CORE_LIBS)
	$(CC) $(KG_LDFLAGS) -o $@ $(CLI_SRCS:%.c=$(BUILD)/%.o) $(CLI_EXTRA_LIBS) $(KG_CORE_LIBS) \
		$(PKG_LIBS) -ldl -lpthread -lm
all: $(KGATE_BIN)
CPPCHECK_DIRS += cli
