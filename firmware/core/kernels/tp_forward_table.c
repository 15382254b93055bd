/* tp_forward_table.c - the forward kernel tables: the reference kernels, and the build's
 * (tp_target_forward), which a target with optimized kernels fills with them. */
#include "tp_kernels.h"

#define TP_REF_FORWARD_KERNELS                                                                \
    {                                                                                         \
        tp_conv2d_s8, tp_conv2d_s8_scratch_bytes, tp_depthwise_conv2d_s8,                     \
            tp_depthwise_conv2d_s8_scratch_bytes, tp_fully_connected_s8,                      \
            tp_fully_connected_s8_scratch_bytes, tp_add_s8, tp_avg_pool2d_s8, tp_mean_hw_s8,  \
            tp_pad_s8, tp_softmax_s8                                                          \
    }

const tp_forward_kernels tp_ref_forward = TP_REF_FORWARD_KERNELS;

/* No target has optimized kernels yet: the build runs the reference ones. */
const tp_forward_kernels tp_target_forward = TP_REF_FORWARD_KERNELS;
