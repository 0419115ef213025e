# verifier: one verification, in rooms along its flow and the trust line (README.md's Layout):
# verify.c (the phases in order) above phases/ above run.c (one verification's state); beside them
# session/ (the parent's side of the runner's and kgate-device's wires), judge/ (pure functions over
# what the trusted side observed), report/, arena/ (what a runner is handed), compile/, and plan/ as
# the ground floor.
VERIFIER_SRCS := $(wildcard verifier/*.c verifier/*/*.c)
# one archive: two members of one name would replace each other
ifneq ($(words $(notdir $(VERIFIER_SRCS))),$(words $(sort $(notdir $(VERIFIER_SRCS)))))
$(error verifier/: two sources share a file name: $(sort $(notdir $(VERIFIER_SRCS))))
endif
$(VERIFIER_LIB): $(VERIFIER_SRCS:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^ # afresh: a moved or deleted source must not linger as a member
CPPCHECK_DIRS += verifier
