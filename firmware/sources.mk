# sources.mk - the portable library's sources and include flags, for every make-based build
# (firmware/Makefile, apps/app.mk for the boards, micropython/tinyprop/micropython.mk). Set
# TP_FW to the firmware folder before including it, or let it find itself.
TP_FW ?= $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
TP_CORE_SRCS := $(sort $(wildcard $(TP_FW)/core/*.c $(TP_FW)/core/blob/*.c \
                                  $(TP_FW)/core/kernels/*.c $(TP_FW)/core/kernels/*/*.c))
TP_PROTO_SRCS := $(sort $(wildcard $(TP_FW)/proto/*.c))
TP_LIB_SRCS := $(TP_CORE_SRCS) $(TP_PROTO_SRCS)
TP_INCLUDES := -I$(TP_FW)/include -I$(TP_FW)/core
