# runner: kgate-run, the process that hosts one candidate or reference inside the sandbox.
RUNNER_SRCS := runner/main.c runner/arena.c runner/table.c runner/cpu.c runner/cuda.c runner/fds.c
RUNNER_BIN := $(BUILD)/kgate-run
$(RUNNER_BIN): $(RUNNER_SRCS:%.c=$(BUILD)/%.o) $(SANDBOX_LIB) $(COMMON_LIB)
	$(CC) $(KG_LDFLAGS) -o $@ $^ $(PKG_LIBS) -ldl -lpthread
# The torch runner (a Python script speaking kgate-run's protocol), the derivation of a module's
# task (torch_derive.py, loaded by the runner's --derive) and the ModelNew builder (torch_build.py,
# run in the compile sandbox) live beside kgate-run.
TORCH_RUNNER := $(BUILD)/torch_runner.py
TORCH_DERIVE := $(BUILD)/torch_derive.py
$(BUILD)/torch_%.py: runner/torch_%.py
	@mkdir -p $(dir $@)
	cp $< $@
TORCH_BUILDER := $(BUILD)/torch_build.py
# the torch runner on a GPU (torch_device.py, loaded by the runner) and the filter library it
# applies its sandbox's seccomp profile with, once CUDA is up (pyfilter.c)
TORCH_DEVICE := $(BUILD)/torch_device.py
FILTER_LIB := $(BUILD)/libkgate-filter.so
$(FILTER_LIB): $(BUILD)/runner/pyfilter.o $(BUILD)/runner/fds.o $(SANDBOX_LIB) $(COMMON_LIB)
	$(CC) $(KG_LDFLAGS) -shared -Wl,--exclude-libs,ALL -o $@ $^ $(PKG_LIBS) -ldl -lpthread
all: $(RUNNER_BIN) $(TORCH_RUNNER) $(TORCH_DERIVE) $(TORCH_BUILDER) $(TORCH_DEVICE) $(FILTER_LIB)
CPPCHECK_DIRS += runner
