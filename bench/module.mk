# bench: the verifier's benchmark script, run by `make bench` next to the sandbox's programs.
$(BUILD)/bench/bin/verify: bench/verify.sh
	@mkdir -p $(dir $@)
	cp $< $@
	chmod +x $@
BENCH_BINS += $(BUILD)/bench/bin/verify
