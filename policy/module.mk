# policy: YAML verification policies.
POLICY_SRCS := policy/policy.c
$(POLICY_LIB): $(POLICY_SRCS:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^
CPPCHECK_DIRS += policy
