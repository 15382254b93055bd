/* tp_session.c - binding a checked blob to the caller's arena and params region, and the
 * views the interpreters take of that memory. */
#include "tp_session.h"
#include "tinyprop.h"

#include "blob/tp_check.h"

#include <string.h>

/* Refuse the caller's memory: check (TP_CHECK_*) names what was wrong with it. */
static tp_status refuse_memory(tp_session *s, tp_status status, uint32_t check)
{
    return tp_refuse(&s->fault, status, check, TP_SECTION_HEADER, TP_NO_RECORD, TP_FIELD_NONE, NULL,
                     0u);
}

tp_status tp_session_init(tp_session *s, const uint8_t *blob, uint32_t len, uint8_t *arena,
                          uint32_t arena_len, uint8_t *params, uint32_t params_len)
{
    tp_blob_view v;
    tp_status st;
    if (s == NULL || blob == NULL || (params == NULL && params_len != 0u)) {
        return TP_ERR_ARG;
    }
    memset(s, 0, sizeof *s); /* a failed init leaves the session not loaded */
    memset(&v, 0, sizeof v);
    st = tp_blob_parse(&v, blob, len, &s->fault);
    if (st != TP_OK) {
        return st;
    }
    if (arena == NULL || arena_len < v.req.arena_infer) {
        return refuse_memory(s, TP_ERR_ARENA_TOO_SMALL, TP_CHECK_ARENA_SIZE);
    }
    /* the contract of tinyprop.h: float32 gradients, int64 sums and word-read scratch live at
     * the arena's planned offsets, which are aligned relative to its start */
    if (((uintptr_t)arena & (TP_MEMORY_ALIGN - 1u)) != 0u) {
        return refuse_memory(s, TP_ERR_ARG, TP_CHECK_ARENA_ALIGN);
    }
    if (params != NULL && params_len < v.req.params) {
        return refuse_memory(s, TP_ERR_PARAMS_TOO_SMALL, TP_CHECK_PARAMS_SIZE);
    }
    if (((uintptr_t)params & (TP_MEMORY_ALIGN - 1u)) != 0u) {
        return refuse_memory(s, TP_ERR_ARG, TP_CHECK_PARAMS_ALIGN);
    }
    s->b = v;
    s->arena = arena;
    s->arena_len = arena_len;
    s->params = params; /* NULL: inference only, every constant is read from the blob */
    s->params_len = params_len;
    if (params != NULL) {
        tp_copy_params(s);
    }
    return TP_OK;
}

const tp_fault *tp_session_fault(const tp_session *s)
{
    return s != NULL ? &s->fault : NULL;
}

uint8_t *tp_arena_at(tp_session *s, uint32_t offset, uint32_t size)
{
    if (offset + size > s->arena_high) {
        s->arena_high = offset + size;
    }
    return s->arena + offset;
}

const uint8_t *tp_const_data(const tp_session *s, const tp_tensor *t)
{
    if ((t->flags & TP_T_TRAINABLE) != 0u && s->params != NULL) { /* a training session */
        return s->params + t->params_offset;
    }
    return s->b.data + t->offset;
}

void tp_weights_of(const tp_session *s, const tp_op *op, const tp_tensor *w, tp_weights *view)
{
    view->data = (const int8_t *)(s->b.data + w->offset);
    view->n_out = tp_weight_channels(op, w);
    view->row_len = w->size / view->n_out;
    view->depthwise = op->kind == TP_OP_DEPTHWISE_CONV_2D;
    view->held_map = NULL;
    view->held = NULL;
    view->pairs = NULL;
    view->live = NULL;
    view->n_live = 0u;
    if (s->params != NULL && op->held_map != TP_NONE32) { /* a training session: trained rows */
        view->held_map = s->b.data + op->held_map;
        view->held = (const int8_t *)(s->params + op->held_params);
    }
    view->scales = s->b.data + w->scales_offset;
    view->n_scales = w->n_scales;
    view->scale = w->scale;
}

void tp_copy_params(tp_session *s)
{
    const tp_blob_view *b = &s->b;
    uint32_t i, o, k;
    /* momentum starts at rest, and the padding after a tensor's held rows (each aligned to 4
     * bytes) is zero, as in the host's region: nothing is left of the memory's earlier use */
    memset(s->params, 0, b->req.params);
    for (i = 0; i < b->n_tensors; i++) { /* biases, held whole */
        tp_tensor t;
        tp_decode_tensor(b->tensors, i, &t);
        if ((t.flags & TP_T_TRAINABLE) != 0u) {
            memcpy(s->params + t.params_offset, b->data + t.offset, t.size);
        }
    }
    for (i = 0; i < b->n_ops; i++) { /* held weight rows, gathered from the blob's tensor */
        tp_op op;
        tp_tensor w;
        tp_weights blob_rows;
        tp_decode_op(b->ops, i, &op);
        if (op.held_map == TP_NONE32) {
            continue;
        }
        tp_decode_tensor(b->tensors, op.inputs[1], &w);
        tp_weights_of(s, &op, &w, &blob_rows);
        blob_rows.held_map = NULL; /* read every row from the blob */
        for (o = 0; o < blob_rows.n_out; o++) {
            uint32_t r = tp_held_row(b, &op, o), step;
            const int8_t *src;
            if (r == TP_NONE16) {
                continue;
            }
            src = tp_weights_row(&blob_rows, o, &step);
            for (k = 0; k < blob_rows.row_len; k++) {
                s->params[op.held_params + r * blob_rows.row_len + k] = (uint8_t)src[k * step];
            }
        }
    }
}

tp_status tp_reset_params(tp_session *s)
{
    if (s == NULL) {
        return TP_ERR_ARG;
    }
    s->run.phase = 0u; /* a step under way is abandoned */
    s->step = 0;
    if (s->params != NULL) {
        tp_copy_params(s);
    }
    return TP_OK;
}

static const tp_tensor *io_tensor(const tp_session *s, uint32_t index, tp_tensor *t)
{
    if (s == NULL || s->b.ops == NULL) {
        return NULL;
    }
    tp_decode_tensor(s->b.tensors, index, t);
    return t;
}

int8_t *tp_input(tp_session *s)
{
    tp_tensor t;
    if (io_tensor(s, s != NULL ? s->b.input : 0u, &t) == NULL || (t.flags & TP_T_TILED)) {
        return NULL; /* read in row bands: tp_set_row_source */
    }
    return (int8_t *)(s->arena + t.offset);
}

void tp_set_row_source(tp_session *s, tp_row_source rows, void *ctx)
{
    if (s != NULL) {
        s->rows = rows;
        s->rows_ctx = ctx;
    }
}

const int8_t *tp_output(const tp_session *s)
{
    tp_tensor t;
    return io_tensor(s, s != NULL ? s->b.output : 0u, &t) ? (const int8_t *)(s->arena + t.offset)
                                                          : NULL;
}

uint32_t tp_output_bytes(const tp_session *s)
{
    tp_tensor t;
    return io_tensor(s, s != NULL ? s->b.output : 0u, &t) ? t.size : 0u;
}

const char *tp_class_name(const tp_session *s, uint32_t k)
{
    const uint8_t *name;
    uint32_t len;
    if (s == NULL || s->b.ops == NULL || k >= s->b.req.n_classes) {
        return NULL; /* not loaded, or no such class */
    }
    name = tp_blob_section(&s->b, "LABL", &len);
    if (name == NULL) {
        return NULL;
    }
    /* a walk over the names before k: the loader checked that n_classes terminated names
     * follow the header (tp_check_labels), so it stays inside LABL */
    name += TP_LABL_HDR_BYTES;
    for (; k > 0u; k--) {
        while (*name != 0u) {
            name++;
        }
        name++;
    }
    return (const char *)name;
}

/* The only check of a session's hyper-parameters: the steps trust s->hp. */
tp_status tp_set_hparams(tp_session *s, const tp_hparams *hp)
{
    if (s == NULL || hp == NULL) {
        return TP_ERR_ARG;
    }
    if (!(hp->lr >= 0.0f && hp->lr <= TP_LR_MAX)) { /* NaN fails both */
        return TP_ERR_BAD_LR;
    }
    if (!(hp->momentum >= 0.0f && hp->momentum < 1.0f)) {
        return TP_ERR_BAD_MOMENTUM;
    }
    if (hp->momentum != 0.0f && s->b.req.optimizer == 0u) {
        return TP_ERR_NO_OPTIMIZER;
    }
    if (hp->flags & ~TP_HP_NO_QAS) {
        return TP_ERR_BAD_HP_FLAGS;
    }
    s->hp = *hp;
    s->run.phase = 0u; /* a step under way is abandoned */
    return TP_OK;
}

void tp_set_step(tp_session *s, uint32_t step)
{
    if (s != NULL) {
        s->step = step;
        s->run.phase = 0u; /* a step under way is abandoned */
    }
}

void tp_use_reference_kernels(tp_session *s, int reference)
{
    if (s != NULL) {
        s->flags = reference ? s->flags | TP_SESSION_REFERENCE_KERNELS
                             : s->flags & ~TP_SESSION_REFERENCE_KERNELS;
    }
}

#ifdef TP_PROFILE
void tp_set_profile(tp_session *s, tp_profile_hook hook, void *ctx)
{
    if (s != NULL) {
        s->profile = hook;
        s->profile_ctx = ctx;
    }
}
#endif

uint32_t tp_session_size(void)
{
    return (uint32_t)sizeof(tp_session);
}
