# tests: cmocka unit tests of the verifier, policy and common rooms (one program per file, run
# one process each by scripts/run-tests.sh) and the integration scripts in tests/integration/.
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/test_%.c=$(BUILD)/tests/bin/unit-%)
$(BUILD)/tests/bin/unit-%: $(BUILD)/tests/unit/test_%.o $(KG_CORE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(KG_LDFLAGS) -o $@ $< $(KG_CORE_LIBS) $(PKG_LIBS) $(CMOCKA_LIBS) -ldl -lpthread -lm
TEST_BINS += $(UNIT_BINS)
# unit-arena also maps an arena as the runner does (runner/arena.c)
$(BUILD)/tests/bin/unit-arena: $(BUILD)/tests/unit/test_arena.o $(BUILD)/runner/arena.o $(BUILD)/runner/table.o $(KG_CORE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(KG_LDFLAGS) -o $@ $(filter %.o,$^) $(KG_CORE_LIBS) $(PKG_LIBS) $(CMOCKA_LIBS) -ldl -lpthread -lm
# unit-wire_table reads forged tensor tables as the runner does (runner/table.c)
$(BUILD)/tests/bin/unit-wire_table: $(BUILD)/tests/unit/test_wire_table.o $(BUILD)/runner/table.o $(KG_CORE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(KG_LDFLAGS) -o $@ $(filter %.o,$^) $(KG_CORE_LIBS) $(PKG_LIBS) $(CMOCKA_LIBS) -ldl -lpthread -lm
CPPCHECK_DIRS += tests/unit
# GPU checks of the trusted device's own kernels (tests/gpu/*.c): built and run everywhere, skipped
# (77) where there is no driver; `make test-gpu` runs them with --require
GPU_TEST_SRCS := $(wildcard tests/gpu/*.c)
GPU_TEST_BINS := $(GPU_TEST_SRCS:tests/gpu/%.c=$(BUILD)/tests/bin/gpu-%)
$(BUILD)/tests/bin/gpu-%: $(BUILD)/tests/gpu/%.o $(KG_CORE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(KG_LDFLAGS) -o $@ $< $(KG_CORE_LIBS) $(PKG_LIBS) -ldl -lpthread -lm
# gpu-kernels keeps the device busy with kgate-device's own flush kernel (the quiet-device probe)
$(BUILD)/tests/bin/gpu-kernels: $(BUILD)/tests/gpu/kernels.o $(BUILD)/device/fatbin.o $(KG_CORE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(KG_LDFLAGS) -o $@ $< $(BUILD)/device/fatbin.o $(KG_CORE_LIBS) $(PKG_LIBS) -ldl -lpthread -lm
TEST_BINS += $(GPU_TEST_BINS)
CPPCHECK_DIRS += tests/gpu
