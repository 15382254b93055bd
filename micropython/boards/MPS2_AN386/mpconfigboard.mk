# MPS2_AN386 - MicroPython's qemu port on QEMU's mps2-an386, the Cortex-M4F board tinyprop's
# own firmware runs on (boards/qemu-m4), with an nRF52840's 256 KB of RAM. The qemu port has
# no such board; pass this folder from outside its tree (docs/micropython.md):
#
#   make -C ports/qemu BOARD=MPS2_AN386 BOARD_DIR=/path/to/tinyprop/micropython/boards/MPS2_AN386 \
#        USER_C_MODULES=/path/to/tinyprop/micropython
QEMU_ARCH = arm
QEMU_MACHINE = mps2-an386

CFLAGS += -mthumb -mcpu=cortex-m4 -mfpu=fpv4-sp-d16 -mfloat-abi=hard
CFLAGS += -DQEMU_SOC_MPS2
CFLAGS += -DMICROPY_HW_MCU_NAME='"Cortex-M4F"'

LDSCRIPT = $(BOARD_DIR)/mps2_an386.ld

SRC_BOARD_O = shared/runtime/gchelper_native.o shared/runtime/gchelper_thumb2.o

MPY_CROSS_FLAGS += -march=armv7emsp

# single-precision floats in hardware (the port's startup turns the FPU on)
MICROPY_FLOAT_IMPL ?= float
SUPPORTS_HARDWARE_FP_SINGLE = 1
