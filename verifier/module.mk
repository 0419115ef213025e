# verifier: tasks, inputs, checks, timing, verdicts and reports.
VERIFIER_SRCS := $(wildcard verifier/*.c)
$(VERIFIER_LIB): $(VERIFIER_SRCS:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^
CPPCHECK_DIRS += verifier
