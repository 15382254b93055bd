/* tp_kernels.h - int8 forward kernels (reference versions in tp_kernels_ref.c).
 *
 * Every kernel takes one tp_kernel_args: the decoded op and tensor views plus the memory the
 * op loop (tp_forward.c) resolved for them. Shapes, offsets and parameter ranges were checked by
 * the blob loader, so a kernel cannot fail and returns nothing. Tensors are NHWC with N = 1.
 * Optimized kernels for a target go beside these and must match them bit for bit.
 */
#ifndef TP_KERNELS_H
#define TP_KERNELS_H

#include "tp_internal.h"

typedef struct {
    const tp_session *s; /* weighted ops read their weights row by row (tp_weight_row) */
    const tp_op *op;
    const tp_tensor *t_in;  /* first input */
    const tp_tensor *t_in2; /* ADD: second input; weighted ops: weights (else NULL) */
    const tp_tensor *t_out;
    const int8_t *in;
    const int8_t *in2;    /* ADD: second input */
    const uint8_t *bias;  /* little-endian int32[out channels], or NULL */
    const uint8_t *mult;  /* little-endian int32[op->n_mult], or NULL */
    const uint8_t *shift; /* little-endian int32[op->n_mult], or NULL */
    int8_t *out;
} tp_kernel_args;

typedef void (*tp_kernel_fn)(const tp_kernel_args *a);

void tp_conv2d_s8(const tp_kernel_args *a);
void tp_depthwise_conv2d_s8(const tp_kernel_args *a);
void tp_fully_connected_s8(const tp_kernel_args *a);
void tp_add_s8(const tp_kernel_args *a);
void tp_avg_pool2d_s8(const tp_kernel_args *a);
void tp_mean_hw_s8(const tp_kernel_args *a);
void tp_pad_s8(const tp_kernel_args *a);
void tp_reshape_s8(const tp_kernel_args *a);
void tp_softmax_s8(const tp_kernel_args *a);

/* The reference kernel of each op kind (tp_op_kind), NULL for codes that are not ops. */
extern const tp_kernel_fn tp_ref_kernels[TP_OP_KIND_COUNT];

#endif
