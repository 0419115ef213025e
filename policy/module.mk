# policy: YAML verification policies.
POLICY_SRCS := policy/policy.c
$(POLICY_LIB): $(POLICY_SRCS:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^ # afresh: a moved or deleted source must not linger as a member
CPPCHECK_DIRS += policy
