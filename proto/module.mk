# proto: kgate.proto, the messages between the core and agent plugins. protoc-c generates the C
# into the build directory (never into the source tree); everything that includes
# "proto/kgate.pb-c.h" waits for it through the order-only prerequisite $(PROTO_HDR).
PROTO_SRC := proto/kgate.proto
PROTO_GEN_C := $(BUILD)/proto/kgate.pb-c.c
PROTO_HDR := $(BUILD)/proto/kgate.pb-c.h
PROTO_OBJ := $(BUILD)/proto/kgate.pb-c.o
PROTO_LIB := $(BUILD)/libkgproto.a

# One recipe writes both files; the header is declared as made by the same rule through a
# pattern rule with two targets, which GNU make runs once.
$(BUILD)/proto/%.pb-c.c $(BUILD)/proto/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/proto
	@$(if $(Q),echo "  PROTOC  $<")
	$(Q)protoc-c --proto_path=proto --c_out=$(BUILD)/proto $<

$(PROTO_OBJ): $(PROTO_GEN_C) $(PROTO_HDR)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(KG_CFLAGS) -c $< -o $@

$(PROTO_LIB): $(PROTO_OBJ)
	rm -f $@ && $(AR) rcs $@ $^ # afresh: a moved or deleted source must not linger as a member

# cppcheck does not read system headers, so the generated header's version guard would see
# PROTOBUF_C_VERSION_NUMBER undefined and hit its #error: give cppcheck the installed version.
PROTOBUF_C_VERSION_NUMBER := $(shell pkg-config --modversion libprotobuf-c 2>/dev/null | \
	awk -F. '{ printf "%d%03d%03d", $$1, $$2, $$3 }')
CPPCHECK_DIRS += -DPROTOBUF_C_VERSION_NUMBER=$(PROTOBUF_C_VERSION_NUMBER)
