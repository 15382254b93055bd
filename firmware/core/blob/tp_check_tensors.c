/* tp_check_tensors.c - every TENS record on its own: type, flags, shape and size, and its data
 * inside the region its flags name (DATA, the inference arena, the parameters). */
#include "tinyprop.h"
#include "tp_check.h"

static tp_status check_tensor(const tp_blob_view *v, uint32_t i, const tp_tensor *t, tp_fault *f)
{
    static const uint32_t dtype_size[4] = {0, 1, 4, 4};
    uint64_t bytes;
    uint32_t d;
    if (t->dtype == TP_DT_NONE) {
        return t->flags == 0u && t->size == 0u
                   ? TP_OK
                   : TP_REFUSE(f, TP_ERR_BLOB_INVALID, TENSOR_SHAPE_OPERAND, TENS, i, TENS_FLAGS);
    }
    if (t->dtype > TP_DT_FLOAT32 || t->rank > 4u || (t->flags & ~15u) != 0u ||
        ((t->flags & TP_T_TILED) != 0u && (t->flags != TP_T_TILED || t->dtype != TP_DT_INT8)) ||
        (t->flags & (TP_T_CONST | TP_T_ARENA)) == (TP_T_CONST | TP_T_ARENA) ||
        ((t->flags & TP_T_TRAINABLE) != 0u && (t->flags & TP_T_CONST) == 0u)) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TENSOR_TYPE, TENS, i, TENS_FLAGS);
    }
    bytes = dtype_size[t->dtype];
    for (d = 0; d < 4; d++) {
        if ((d < t->rank) != (t->dims[d] != 0u)) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TENSOR_DIMS, TENS, i, TENS_DIMS);
        }
        bytes *= d < t->rank ? t->dims[d] : 1u;
    }
    /* < 2^31 bytes: kernels index with int32 */
    if (bytes != t->size || bytes > 0x7FFFFFFFu) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TENSOR_SIZE, TENS, i, TENS_SIZE);
    }
    /* int8 zero points lie in the int8 range (TFLite's spec); the kernels' offsets rely on it */
    if (t->dtype == TP_DT_INT8 && (t->zero_point < -128 || t->zero_point > 127)) {
        return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TENSOR_ZERO_POINT, TENS, i, TENS_ZERO_POINT);
    }
    if ((t->flags & TP_T_CONST) != 0u && !within(t->offset, t->size, v->data_len)) {
        return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, TENSOR_DATA, TENS, i, TENS_OFFSET);
    }
    if ((t->flags & TP_T_ARENA) != 0u) {
        if (t->dtype != TP_DT_INT8) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TENSOR_ARENA_TYPE, TENS, i, TENS_DTYPE);
        }
        if (!within(t->offset, t->size, v->req.arena_infer)) {
            return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, TENSOR_ARENA, TENS, i, TENS_OFFSET);
        }
    }
    /* TRAINABLE marks biases, held whole; held weight rows are an op's (check_held) */
    if ((t->flags & TP_T_TRAINABLE) != 0u) {
        if (t->dtype != TP_DT_INT32) {
            return TP_REFUSE(f, TP_ERR_BLOB_INVALID, TENSOR_TRAINABLE_TYPE, TENS, i, TENS_DTYPE);
        }
        if (!within(t->params_offset, t->size, tp_param_bytes(v))) {
            return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, TENSOR_PARAMS, TENS, i, TENS_PARAMS_OFFSET);
        }
    }
    if (t->n_scales != 0u && !within(t->scales_offset, 4ull * t->n_scales, v->data_len)) {
        return TP_REFUSE(f, TP_ERR_BLOB_BOUNDS, TENSOR_SCALES, TENS, i, TENS_SCALES_OFFSET);
    }
    return TP_OK;
}

tp_status tp_check_tensors(const tp_blob_view *v, tp_fault *f)
{
    uint32_t i;
    for (i = 0; i < v->n_tensors; i++) {
        tp_tensor t;
        tp_status st;
        tp_decode_tensor(v->tensors, i, &t);
        st = check_tensor(v, i, &t, f);
        if (st != TP_OK) {
            return st;
        }
    }
    return TP_OK;
}
