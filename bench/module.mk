# bench: the verifier's benchmark script, run by `make bench` next to the sandbox's programs.
$(BUILD)/bench/bin/verify: bench/verify.sh
	@mkdir -p $(dir $@)
	cp $< $@
	chmod +x $@
BENCH_BINS += $(BUILD)/bench/bin/verify
# the CPU peer: an unhardened harness (bench/plain_harness.c), built plainly and run by verify.sh
$(BUILD)/bench/peer/plain_harness: bench/plain_harness.c
	@mkdir -p $(dir $@)
	$(CC) $(KG_CFLAGS) -Iinclude -o $@ $< -ldl -lm
BENCH_BINS += $(BUILD)/bench/peer/plain_harness
