# runner: kgate-run, the process that hosts one candidate or reference inside the sandbox.
RUNNER_SRCS := runner/main.c runner/arena.c runner/cpu.c runner/cuda.c runner/fds.c
RUNNER_BIN := $(BUILD)/kgate-run
$(RUNNER_BIN): $(RUNNER_SRCS:%.c=$(BUILD)/%.o) $(SANDBOX_LIB) $(COMMON_LIB)
	$(CC) $(KG_LDFLAGS) -o $@ $^ $(PKG_LIBS) -ldl -lpthread
# The torch reference runner (a Python script speaking kgate-run's protocol) lives beside kgate-run,
# and the derivation of a module's task (torch_derive.py, loaded by the runner's --derive) beside it.
TORCH_RUNNER := $(BUILD)/torch_runner.py
TORCH_DERIVE := $(BUILD)/torch_derive.py
$(BUILD)/torch_%.py: runner/torch_%.py
	@mkdir -p $(dir $@)
	cp $< $@
all: $(RUNNER_BIN) $(TORCH_RUNNER) $(TORCH_DERIVE)
CPPCHECK_DIRS += runner
