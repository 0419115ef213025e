# bench fragment of the sandbox room (included from sandbox/module.mk)
$(BUILD)/bench/bin/sandbox_spawn: $(BUILD)/bench/sandbox_spawn.o $(SANDBOX_LINK)
	@mkdir -p $(dir $@)
	$(CC) $(KG_LDFLAGS) $^ -o $@ $(PKG_LIBS) -lm
BENCH_BINS += $(BUILD)/bench/bin/sandbox_spawn
