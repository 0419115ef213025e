# device: kgate-device alone, the trusted process that owns the GPU's memory for a run (device/keeper.c:
# kgate's commands; device/driver.c: the driver, its context and the exportable allocations), and its
# own kernels (device/kernels.cu: the inputs drawn, the inputs compared). No candidate code runs here.
# kgate's side of its protocol is verifier/session/keeper.c; libkgdevice holds the one piece both
# processes run, the staging plan (device/stage.c), so that kgate plans what the keeper will stage.
DEVICE_SRCS := device/stage.c
$(DEVICE_LIB): $(DEVICE_SRCS:%.c=$(BUILD)/%.o)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^
# The kernels need nvcc (the CUDA toolkit); a build without it gives a keeper without them, which
# kgate then stages from the host. No FMA contraction nor flushed denormals: the generator's core
# must give the host's bits (common/kg_gen.h). SASS for Ampere and Hopper, PTX for what follows.
NVCC ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
KG_NVCC_FLAGS := -fatbin -O3 -fmad=false -ftz=false -prec-div=true -prec-sqrt=true -Icommon -I. \
	-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
	-gencode arch=compute_90,code=compute_90
ifneq ($(NVCC),)
$(BUILD)/device/kernels.fatbin: device/kernels.cu common/kg_gen.h device/judge.h device/wire.h
	@mkdir -p $(dir $@)
	$(NVCC) $(KG_NVCC_FLAGS) -o $@ $<
$(BUILD)/device/fatbin.o: device/fatbin.S $(BUILD)/device/kernels.fatbin
	@mkdir -p $(dir $@)
	$(CC) -c -DKG_FATBIN='"$(BUILD)/device/kernels.fatbin"' -o $@ $<
else
$(BUILD)/device/fatbin.o: device/fatbin.S
	@mkdir -p $(dir $@)
	$(CC) -c -o $@ $<
endif
DEVICE_BIN := $(BUILD)/kgate-device
$(DEVICE_BIN): $(BUILD)/device/keeper.o $(BUILD)/device/driver.o $(BUILD)/device/stage.o $(BUILD)/device/fatbin.o $(COMMON_LIB)
	$(CC) $(KG_LDFLAGS) -o $@ $^ -ldl -lm
all: $(DEVICE_BIN)
CPPCHECK_DIRS += device
