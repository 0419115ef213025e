# verifier: tasks, inputs, checks, timing, verdicts and reports.
VERIFIER_SRCS := $(wildcard verifier/*.c)
$(VERIFIER_LIB): $(VERIFIER_SRCS:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^ # afresh: a moved or deleted source must not linger as a member
CPPCHECK_DIRS += verifier
