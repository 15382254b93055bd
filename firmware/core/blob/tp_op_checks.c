/* tp_op_checks.c - the loader's table of op kinds (tp_ops.h) and each kind's own checks: the
 * shapes of its operands and its parameters. tp_check_ops.c's check_op has checked what every op
 * shares, and the operands of the kind's row, before it calls these. */
#include "tinyprop.h"
#include "tp_blob.h"

#define CHECK_DECL(KIND, code, name, weights, inputs, grad, q_row, q_chan) \
    int tp_check_##name(const tp_checked_op *c);
TP_OPS(CHECK_DECL)
#undef CHECK_DECL

/* Output size of a window op: TFLite's VALID (no padding) or SAME (ComputePaddingHeightWidth).
 * Either way every window overlaps the input, so average pooling never divides by zero. */
static int window_ok(uint32_t in, uint32_t k, uint32_t stride, uint32_t pad, uint32_t out)
{
    uint32_t same_out, need;
    if (k == 0u || stride == 0u) {
        return 0;
    }
    if (pad == 0u && in >= k && out == (in - k) / stride + 1u) {
        return 1;
    }
    same_out = (in + stride - 1u) / stride;
    need = (same_out - 1u) * stride + k;
    return out == same_out && pad == (need > in ? need - in : 0u) / 2u;
}

static int windows_ok(const tp_op *op, const tp_tensor *in, const tp_tensor *out)
{
    return tp_is_nhwc(in) && tp_is_nhwc(out) &&
           window_ok(in->dims[1], op->k[0], op->stride[0], op->pad[0], out->dims[1]) &&
           window_ok(in->dims[2], op->k[1], op->stride[1], op->pad[1], out->dims[2]);
}

int tp_check_conv2d(const tp_checked_op *c)
{
    const tp_op *op = c->op;
    const tp_tensor *w = &c->weights;
    return w->rank == 4u && windows_ok(op, &c->in, &c->out) && w->dims[0] == c->out.dims[3] &&
           w->dims[1] == op->k[0] && w->dims[2] == op->k[1] && w->dims[3] == c->in.dims[3];
}

int tp_check_depthwise_conv2d(const tp_checked_op *c)
{
    const tp_op *op = c->op;
    const tp_tensor *w = &c->weights;
    return w->rank == 4u && windows_ok(op, &c->in, &c->out) && w->dims[0] == 1u &&
           w->dims[1] == op->k[0] && w->dims[2] == op->k[1] && op->depth_multiplier >= 1u &&
           w->dims[3] == c->out.dims[3] &&
           (uint32_t)c->in.dims[3] * op->depth_multiplier == c->out.dims[3];
}

int tp_check_fully_connected(const tp_checked_op *c)
{
    const tp_tensor *w = &c->weights;
    return w->rank == 2u && w->dims[0] == tp_tensor_elems(&c->out) &&
           w->dims[1] == tp_tensor_elems(&c->in);
}

int tp_check_add(const tp_checked_op *c)
{
    const tp_op *op = c->op;
    return c->in2.size == c->out.size && c->in.size == c->out.size && op->n_mult == 3u &&
           op->left_shift >= 0 && op->left_shift <= 30;
}

int tp_check_avg_pool2d(const tp_checked_op *c)
{
    return windows_ok(c->op, &c->in, &c->out) && c->in.dims[3] == c->out.dims[3];
}

/* TFLite's int8 max pool keeps its input's quantization (the converter gives its output the
 * same): the kernel compares and copies int8 values. */
int tp_check_max_pool2d(const tp_checked_op *c)
{
    return tp_check_avg_pool2d(c) && c->in.scale == c->out.scale &&
           c->in.zero_point == c->out.zero_point;
}

int tp_check_mean_hw(const tp_checked_op *c)
{
    return tp_is_nhwc(&c->in) && tp_tensor_elems(&c->out) == c->in.dims[3] && c->op->mode == 2u &&
           c->op->n_mult == 1u;
}

int tp_check_pad(const tp_checked_op *c)
{
    const tp_op *op = c->op;
    const tp_tensor *in = &c->in, *out = &c->out;
    return tp_is_nhwc(in) && tp_is_nhwc(out) && in->dims[3] == out->dims[3] &&
           (uint32_t)in->dims[1] + op->pad[0] + op->pad_after[0] == out->dims[1] &&
           (uint32_t)in->dims[2] + op->pad[1] + op->pad_after[1] == out->dims[2];
}

int tp_check_reshape(const tp_checked_op *c)
{
    return c->in.size == c->out.size;
}

int tp_check_softmax(const tp_checked_op *c)
{
    const tp_op *op = c->op;
    return c->in.size == c->out.size && c->in.rank >= 1u && op->n_mult == 1u && op->diff_min <= 0 &&
           tp_le_i32(c->v->data + op->mult_offset, 1) >= 0;
}

#define OP_DEF(KIND, code, name, weights, inputs, grad, q_row, q_chan) \
    [TP_OP_##KIND] = {tp_check_##name, weights, inputs, q_row, q_chan},
const tp_op_def tp_op_defs[TP_OP_KIND_COUNT] = {TP_OPS(OP_DEF)};
#undef OP_DEF
