/* tp_gradient_table.c - the gradient kernel tables (training builds only): the reference
 * kernels, and the build's (tp_target_gradient): the Cortex-M DSP kernels for integer maps
 * where the target has them (TP_KERNELS_DSP), the reference kernels for the rest. */
#include "tinyprop.h"
#include "tp_kernels.h"

#define TP_GRADIENT_KERNELS(conv_input_q, depthwise_input_q, conv_weight_q, depthwise_weight_q,    \
                            bias_sums_q)                                                           \
    {                                                                                              \
        tp_conv2d_input_grad_f32, tp_depthwise_conv2d_input_grad_f32,                              \
            tp_fully_connected_input_grad_f32, tp_conv2d_weight_grad_f32,                          \
            tp_depthwise_conv2d_weight_grad_f32, tp_fully_connected_weight_grad_f32,               \
            tp_bias_grad_f32, tp_avg_pool2d_input_grad_f32, tp_max_pool2d_input_grad_f32,          \
            tp_mean_hw_input_grad_f32, tp_pad_input_grad_f32, tp_add_input_grad_f32,               \
            tp_input_grad_f32_scratch_bytes, tp_weight_grad_f32_scratch_bytes, conv_input_q,       \
            depthwise_input_q, tp_fully_connected_input_grad_q, conv_weight_q, depthwise_weight_q, \
            tp_fully_connected_weight_grad_q, bias_sums_q                                          \
    }

const tp_gradient_kernels tp_ref_gradient = TP_GRADIENT_KERNELS(tp_conv2d_input_grad_q,
                                                                tp_depthwise_conv2d_input_grad_q,
                                                                tp_conv2d_weight_grad_q,
                                                                tp_depthwise_conv2d_weight_grad_q,
                                                                tp_bias_sums_q);

#if TP_KERNELS_DSP
const tp_gradient_kernels tp_target_gradient = TP_GRADIENT_KERNELS(
    tp_arm_conv2d_input_grad_q, tp_arm_depthwise_conv2d_input_grad_q, tp_arm_conv2d_weight_grad_q,
    tp_arm_depthwise_conv2d_weight_grad_q, tp_arm_bias_sums_q);
#else
const tp_gradient_kernels tp_target_gradient =
    TP_GRADIENT_KERNELS(tp_conv2d_input_grad_q, tp_depthwise_conv2d_input_grad_q,
                        tp_conv2d_weight_grad_q, tp_depthwise_conv2d_weight_grad_q, tp_bias_sums_q);
#endif
