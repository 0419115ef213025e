# runner: kgate-run, the process that hosts one candidate or reference inside the sandbox.
RUNNER_SRCS := runner/main.c runner/arena.c runner/cpu.c runner/cuda.c runner/fds.c
RUNNER_BIN := $(BUILD)/kgate-run
$(RUNNER_BIN): $(RUNNER_SRCS:%.c=$(BUILD)/%.o) $(SANDBOX_LIB) $(COMMON_LIB)
	$(CC) $(KG_LDFLAGS) -o $@ $^ $(PKG_LIBS) -ldl -lpthread
all: $(RUNNER_BIN)
CPPCHECK_DIRS += runner
