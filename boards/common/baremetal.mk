# baremetal.mk - what the bare-metal board Makefiles (qemu-m4, rv32-virt) share: the cross tools,
# the flags, the sources in boards/common/ and the link rule against the board's link.ld (which
# INCLUDEs baremetal.ld), with a .map and a .size beside the ELF. A board Makefile sets these,
# then includes this file (as $(TP_ROOT)/boards/common/baremetal.mk):
#   BOARD_DIR   its folder (anywhere: a user's board may live outside the repository)
#   BOARD       its folder's name (also what tp_board_name() returns)
#   CROSS       the toolchain prefix (overridable: CROSS ?= ...)
#   ARCH_FLAGS  CPU and ABI flags, for compiling and linking
#   ARCH_CFLAGS any other compile-only flags (may be empty)
#   LIBC_SPECS  the C library's specs file for the link
# Its own sources are $(BOARD_DIR)/startup.c and board.c; STACK_SIZE (bytes, multiple of 32)
# sizes the stack in link.ld.
include $(dir $(lastword $(MAKEFILE_LIST)))../../firmware/apps/app.mk

CC := $(CROSS)gcc
SIZE := $(CROSS)size
STACK_SIZE ?= 16384
LINK_LD := $(BOARD_DIR)/link.ld

CFLAGS := $(ARCH_FLAGS) $(ARCH_CFLAGS) $(COMMON_CFLAGS) $(INCLUDES) -I$(ROOT)/boards/common \
          -DTP_BOARD_NAME='"$(BOARD)"'
# No OS library (no syscall stubs): anything that needs a heap or file I/O (malloc, printf to
# stdout) fails to link instead of failing at run time.
# -L: the board's link.ld INCLUDEs baremetal.ld from boards/common.
LDFLAGS := $(ARCH_FLAGS) $(LIBC_SPECS) -nostartfiles -T $(LINK_LD) -L$(ROOT)/boards/common \
           -Wl,--gc-sections -Wl,--defsym=__stack_size=$(STACK_SIZE) -Wl,--no-warn-rwx-segments
LDLIBS := -lm

BOARD_SRCS := $(addprefix $(BOARD_DIR)/,startup.c board.c) \
              $(addprefix $(ROOT)/boards/common/,baremetal.c semihost.c vcamera.c)
SRCS := $(BOARD_SRCS) $(FIRMWARE_SRCS) $(APP_SRC)
OBJS := $(call obj_of,$(BOARD_SRCS) $(FIRMWARE_SRCS)) $(APP_OBJ)
ELF := $(BUILD)/$(PROG).elf

.PHONY: all path clean
all: $(ELF)

path:
	@echo $(ELF)

$(call record_sources,$(SRCS) $(STACK_SIZE))

$(ELF): $(OBJS) $(LINK_LD) $(ROOT)/boards/common/baremetal.ld $(SOURCES_LIST)
	$(CC) $(LDFLAGS) -Wl,-Map=$(BUILD)/$(PROG).map -o $@ $(OBJS) $(LDLIBS)
	$(SIZE) $@ | tee $(BUILD)/$(PROG).size

clean:
	rm -rf $(OBJ_DIR) $(LIB_DIR) $(ELF) $(BUILD)/$(PROG).map $(BUILD)/$(PROG).size

-include $(OBJS:.o=.d)
