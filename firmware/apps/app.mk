# app.mk - what every board Makefile shares: the repository paths, the application choice and the
# portable library (firmware/sources.mk). A board Makefile sets BOARD_DIR (its own folder, which
# may be outside the repository) and BOARD (the folder's name), includes this through TP_ROOT (the
# repository; tinyprop passes it), then adds its own sources, flags and link rule. The applications (firmware/apps/) use only tinyprop.h,
# tp_proto.h and the HAL, tp_board.h, which each board implements.
#
#   APP=device    (default) the device main loop: tp_device_main() in apps/device/tp_device.c
#   APP=selftest  the HAL self-test, apps/selftest/selftest.c (tp_selftest_main)
#   APP=kerneltest the kernels' harness, apps/kerneltest/kerneltest.c (tp_kerneltest_main):
#                 reference vs the build's kernels on the cases of a bulk file; BLOB optional
#   APP=selftrain the self-training run, apps/selftrain/selftrain.c (tp_selftrain_main): needs
#                 BLOB and SAMPLES=path/to/samples header (tinyprop's write_samples_header)
#   APP=learn     the learn application, apps/learn/learn.c (tp_learn_main): the board learns
#                 from its camera; needs BLOB, and LEARN=path/to/config header (optional: the
#                 TP_LEARN_* settings, tp_learn.h; tinyprop learn writes one)
#   APP=<file.c> APP_ENTRY=<function>   any other application
#
#   BLOB=path/to/model_tpb.h   compile that model blob header into the device firmware (flash);
#                 the build is then PROG-BLOB_TAG, BLOB_TAG defaulting to the header's directory
#                 name (tinyprop.boards writes build/blobs/<blob crc>/model_tpb.h), so firmware
#                 for different blobs never shares objects
#
#   VARIANT=<name> OPT=<level> KERNELS_CC=<compiler and flags>   a build variant (tests: the
#                 DSP kernels' C fallbacks equal the reference): every source at OPT (default
#                 -O2), firmware/core/kernels/arm/ compiled by KERNELS_CC (e.g. clang) if given;
#                 the build is then PROG-VARIANT
#
# Output: $(TP_BUILD)/$(BOARD)/$(PROG)$(EXT). The library's and the board's objects are shared
# by every output of one application and variant, under $(TP_BUILD)/$(BOARD)/obj-lib-$(LIB)/
# (`make lib` builds them): only the application includes the BLOB, SAMPLES and LEARN headers,
# and only its object, obj-$(PROG)/app.o, is compiled with them, so a new blob compiles one
# file. TP_BUILD defaults to the repository's build/ (an installed tinyprop passes its own,
# writable one). `make path` prints the output path (tinyprop.device.firmware.build_firmware
# uses it).

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/../..)
APP ?= device

ifeq ($(APP),device)
  APP_SRC := $(ROOT)/firmware/apps/device/tp_device.c
  APP_ENTRY := tp_device_main
  PROG := tinyprop
else ifeq ($(APP),selftest)
  APP_SRC := $(ROOT)/firmware/apps/selftest/selftest.c
  APP_ENTRY := tp_selftest_main
  PROG := selftest
else ifeq ($(APP),kerneltest)
  APP_SRC := $(ROOT)/firmware/apps/kerneltest/kerneltest.c
  APP_ENTRY := tp_kerneltest_main
  PROG := kerneltest
  APP_CFLAGS := -DTP_PROFILE
else ifeq ($(APP),learn)
  APP_SRC := $(ROOT)/firmware/apps/learn/learn.c
  APP_ENTRY := tp_learn_main
  PROG := learn
  ifneq ($(filter path,$(MAKECMDGOALS)),path)
    ifeq ($(BLOB),)
      $(error APP=learn needs BLOB=<model header>)
    endif
  endif
else ifeq ($(APP),selftrain)
  APP_SRC := $(ROOT)/firmware/apps/selftrain/selftrain.c
  APP_ENTRY := tp_selftrain_main
  PROG := selftrain
  ifneq ($(filter path,$(MAKECMDGOALS)),path)
    ifeq ($(and $(BLOB),$(SAMPLES)),)
      $(error APP=selftrain needs BLOB=<model header> and SAMPLES=<samples header>)
    endif
  endif
else
  APP_SRC := $(abspath $(APP))
  PROG := $(basename $(notdir $(APP)))
  ifeq ($(APP_ENTRY),)
    $(error APP=$(APP) needs APP_ENTRY=<name of its int entry(void) function>)
  endif
endif

# the objects' name: the application and variant (the headers below tag the output only)
LIB := $(PROG)$(if $(VARIANT),-$(VARIANT))

ifneq ($(BLOB),)
  BLOB_TAG ?= $(notdir $(patsubst %/,%,$(dir $(abspath $(BLOB)))))
  PROG := $(PROG)-$(BLOB_TAG)
  BLOB_CFLAGS := -DTP_MODEL_HEADER='"$(abspath $(BLOB))"'
endif
# SAMPLES: the same for the samples header (build/samples/<tag>/samples.h -> PROG-BLOB_TAG-tag)
ifneq ($(SAMPLES),)
  SAMPLES_TAG ?= $(notdir $(patsubst %/,%,$(dir $(abspath $(SAMPLES)))))
  PROG := $(PROG)-$(SAMPLES_TAG)
  BLOB_CFLAGS += -DTP_SAMPLES_HEADER='"$(abspath $(SAMPLES))"'
endif

# LEARN: the learn app's configuration header (build/learn/<tag>/learn_config.h -> PROG-...-tag)
ifneq ($(LEARN),)
  LEARN_TAG ?= $(notdir $(patsubst %/,%,$(dir $(abspath $(LEARN)))))
  PROG := $(PROG)-$(LEARN_TAG)
  BLOB_CFLAGS += -DTP_LEARN_CONFIG='"$(abspath $(LEARN))"'
endif

ifneq ($(VARIANT),)
  PROG := $(PROG)-$(VARIANT)
endif
OPT ?= -O2

TP_BUILD ?= $(ROOT)/build
BUILD := $(TP_BUILD)/$(BOARD)
OBJ_DIR := $(BUILD)/obj-$(PROG)
LIB_DIR := $(BUILD)/obj-lib-$(LIB)
include $(ROOT)/firmware/sources.mk
FIRMWARE_SRCS := $(TP_LIB_SRCS)
INCLUDES := $(TP_INCLUDES) -I$(BOARD_DIR)
# Same numerics on every board: no fused multiply-add, so floats match the host reference.
COMMON_CFLAGS := -std=c99 $(OPT) -ffp-contract=off -Wall -Wextra -Werror -g \
                 -ffunction-sections -fdata-sections -MMD -MP -DAPP_ENTRY=$(APP_ENTRY) \
                 $(APP_CFLAGS)

.DEFAULT_GOAL := all

# The shared objects mirror the repository's layout, the board folder's (which may live anywhere)
# under board/; the application, which may live anywhere too, is app.o. The board Makefile sets
# CC, CFLAGS (used when the recipes run) and BOARD_SRCS (its own sources: `make lib` expands
# them once the whole Makefile is read).
obj_of = $(patsubst $(ROOT)/%.c,$(LIB_DIR)/%.o,$(patsubst $(BOARD_DIR)/%.c,$(LIB_DIR)/board/%.o,$(1)))
APP_OBJ := $(if $(APP_SRC),$(OBJ_DIR)/app.o)

.PHONY: lib
.SECONDEXPANSION:
lib: $$(call obj_of,$$(BOARD_SRCS) $$(FIRMWARE_SRCS))

$(LIB_DIR)/board/%.o: $(BOARD_DIR)/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(LIB_DIR)/%.o: $(ROOT)/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

ifneq ($(KERNELS_CC),)
$(LIB_DIR)/firmware/core/kernels/arm/%.o: $(ROOT)/firmware/core/kernels/arm/%.c
	@mkdir -p $(dir $@)
	$(KERNELS_CC) $(CFLAGS) -c -o $@ $<
endif

ifneq ($(APP_SRC),)
$(APP_OBJ): $(APP_SRC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLOB_CFLAGS) -c -o $@ $<
endif

# Relink when the set of sources changes (a library source added or removed), not only when a
# source is newer: the list is rewritten only when it differs.
SOURCES_LIST := $(OBJ_DIR)/sources.txt
define record_sources
$(shell mkdir -p $(OBJ_DIR) && echo '$(1)' | cmp -s - $(SOURCES_LIST) || echo '$(1)' > $(SOURCES_LIST))
endef
