/* tp_session.h - a checked blob bound to the caller's memory: the only ways the interpreters
 * reach the arena, the params region and the weights. */
#ifndef TP_SESSION_H
#define TP_SESSION_H

#include "kernels/tp_kernels.h"
#include "tp_blob.h"

/* size bytes of the arena at offset, recorded in the call's high-water mark (s->arena_high).
 * Offsets were checked against the arena by the loader and tp_session_init. */
uint8_t *tp_arena_at(tp_session *s, uint32_t offset, uint32_t size);

/* The bytes of a constant tensor as the forward pass sees it (biases): its RAM copy in the
 * params region when it is trainable and the session trains, else its DATA in the blob. */
const uint8_t *tp_const_data(const tp_session *s, const tp_tensor *t);

/* The weights of a weighted op as kernels read them: held rows from the params region when
 * the session trains, the rest (and everything for inference) from the blob. */
void tp_weights_of(const tp_session *s, const tp_op *op, const tp_tensor *w, tp_weights *view);

/* Fill the params region from the blob's constants, optimizer state zeroed. */
void tp_copy_params(tp_session *s);

#endif /* TP_SESSION_H */
