# common: helpers shared by every room.
COMMON_SRCS := common/common.c common/kg_yaml.c common/kg_vocab.c common/ufile.c common/heartbeat.c common/text.c common/yaml_limits.c common/sha256.c
$(COMMON_LIB): $(COMMON_SRCS:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^ # afresh: a moved or deleted source must not linger as a member
CPPCHECK_DIRS += common
