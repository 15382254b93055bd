# micropython.mk - tinyprop as a MicroPython user C module, for the make-based ports (unix,
# qemu, stm32, nrf, samd, ...): `import tinyprop` (docs/micropython.md).
#
#   make -C ports/unix USER_C_MODULES=/path/to/tinyprop/micropython
#
# USER_C_MODULES names the folder that holds this one (`micropython/` of the tinyprop
# checkout), not this folder itself: MicroPython includes every */micropython.mk one level
# below it, as for its own examples/usercmodule.
TINYPROP_MOD_DIR := $(USERMOD_DIR)
TP_FW := $(abspath $(TINYPROP_MOD_DIR)/../../firmware)
include $(TP_FW)/sources.mk

# The binding is scanned for qstrs; the core is a plain library.
SRC_USERMOD_C += $(TINYPROP_MOD_DIR)/modtinyprop.c
SRC_USERMOD_LIB_C += $(TINYPROP_MOD_DIR)/tp_mpy_link.c $(TP_LIB_SRCS)
CFLAGS_USERMOD += $(TP_INCLUDES) -I$(TINYPROP_MOD_DIR)

# The core's float arithmetic must equal the NumPy reference bit for bit: no fused
# multiply-add, and double constants stay double (the qemu, stm32, nrf and samd ports compile
# everything with -fsingle-precision-constant, which also trips -Werror=double-promotion in
# tp_quant.c). And its loops are compiled for speed: most ports use -Os, which makes a VWW
# training step on a Cortex-M4 6 % slower with the DSP kernels and 69 % with the reference
# ones (docs/micropython.md); TINYPROP_COPT=-Os trades that for flash. Per object, so
# MicroPython's code (modtinyprop.c included: it does no float arithmetic, and MicroPython's
# headers expect the port's flags) keeps its flags. The object paths are the ones py/py.mk
# derives from the sources.
TINYPROP_COPT ?= -O2
TINYPROP_OBJS := $(addprefix $(BUILD)/,$(patsubst %.c,%.o,$(patsubst $(USER_C_MODULES)/%,%,\
                   $(TP_LIB_SRCS) $(TINYPROP_MOD_DIR)/tp_mpy_link.c)))
$(TINYPROP_OBJS): CFLAGS += -fno-single-precision-constant -ffp-contract=off $(TINYPROP_COPT)
