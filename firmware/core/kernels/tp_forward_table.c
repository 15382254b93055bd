/* tp_forward_table.c - the forward kernel tables: the reference kernels, and the build's
 * (tp_target_forward): the Cortex-M DSP kernels where the target has them (TP_KERNELS_DSP,
 * tp_kernels.h), the reference kernels for every other op and target. */
#include "tinyprop.h"
#include "tp_kernels.h"

#define TP_FORWARD_KERNELS(conv, depthwise, avg_pool)                                            \
    {                                                                                            \
        conv, conv##_scratch_bytes, depthwise, depthwise##_scratch_bytes, tp_fully_connected_s8, \
            tp_fully_connected_s8_scratch_bytes, tp_add_s8, avg_pool, tp_mean_hw_s8, tp_pad_s8,  \
            tp_softmax_s8, tp_max_pool2d_s8                                                      \
    }

const tp_forward_kernels tp_ref_forward = TP_FORWARD_KERNELS(tp_conv2d_s8, tp_depthwise_conv2d_s8,
                                                             tp_avg_pool2d_s8);

#if TP_KERNELS_DSP
const tp_forward_kernels tp_target_forward = TP_FORWARD_KERNELS(tp_arm_conv2d_s8,
                                                                tp_arm_depthwise_conv2d_s8,
                                                                tp_arm_avg_pool2d_s8);
#else
const tp_forward_kernels tp_target_forward = TP_FORWARD_KERNELS(tp_conv2d_s8,
                                                                tp_depthwise_conv2d_s8,
                                                                tp_avg_pool2d_s8);
#endif
