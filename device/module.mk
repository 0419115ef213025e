# device: kgate-device, the trusted process that owns the GPU's memory for a run (device/keeper.c),
# and kgate's side of its protocol (device/client.c, in libkgdevice). No candidate code runs here.
DEVICE_SRCS := device/client.c device/stage.c
$(DEVICE_LIB): $(DEVICE_SRCS:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^
DEVICE_BIN := $(BUILD)/kgate-device
$(DEVICE_BIN): $(BUILD)/device/keeper.o $(BUILD)/device/stage.o $(COMMON_LIB)
	$(CC) $(KG_LDFLAGS) -o $@ $^ -ldl
all: $(DEVICE_BIN)
CPPCHECK_DIRS += device
