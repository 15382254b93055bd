/* tp_check.h - the blob loader's checks, one file a section family (tp_check_header.c,
 * _tensors, _ops, _labels, _train, _tile, _plans; tp_check.c runs them in order), and how a check
 * refuses: TP_REFUSE records which check failed and where in the caller's tp_fault, and
 * returns the status.
 *
 * Every check reads only inside blob[0..len) and compares in 64-bit or by subtraction, so no
 * field value can overflow an offset.
 */
#ifndef TP_CHECK_H
#define TP_CHECK_H

#include "tp_blob.h"

/* Every check: X(id, what its refusal means). tp_fault_text names a check by its id in lower
 * case. */
#define TP_CHECKS(X)                                                                             \
    X(NONE, "no check failed")                                                                   \
    /* the header and the section table (tp_check_header.c) */                                   \
    X(TRUNCATED, "shorter than a blob header and its CRC, or than the size it declares")         \
    X(MAGIC, "not a tinyprop blob (the magic is not TPRB)")                                      \
    X(VERSION, "a blob version this firmware does not read")                                     \
    X(HEADER_SIZE, "the header size is not this version's")                                      \
    X(BLOB_SIZE, "the declared size differs from the buffer's length")                           \
    X(CRC, "the CRC trailer does not match the bytes before it")                                 \
    X(SECTION_TABLE, "the section table runs past the blob's body")                              \
    X(SECTION_BOUNDS, "a section outside the body, after the table and before the CRC")          \
    X(SECTION_ALIGN, "a section's offset is not a multiple of 8")                                \
    X(SECTION_TWICE, "a section appears twice")                                                  \
    X(SECTION_MISSING, "TENS, OPS or DATA is missing")                                           \
    X(SECTION_RECORDS, "the section is not a whole number of records (OPS: at least one)")       \
    X(ARENA_LIMIT, "the inference arena is 2^31 bytes or more")                                  \
    X(OPTIMIZER, "optimizer state not float32s after 4-aligned parameters, or without TRAN")     \
    /* TENS (tp_check_tensors.c) */                                                              \
    X(TENSOR_SHAPE_OPERAND, "a shape operand (dtype 0) with flags or data")                      \
    X(TENSOR_TYPE, "an unknown dtype or flag, rank above 4, or flags that contradict")           \
    X(TENSOR_DIMS, "a zero dim inside the rank, or a non-zero one past it")                      \
    X(TENSOR_SIZE, "the size is not product(dims) x the dtype's, or is 2^31 bytes or more")      \
    X(TENSOR_ZERO_POINT, "an int8 tensor's zero point outside [-128, 127]")                      \
    X(TENSOR_DATA, "a constant's data outside DATA")                                             \
    X(TENSOR_ARENA_TYPE, "an arena tensor that is not int8")                                     \
    X(TENSOR_ARENA, "an activation outside the inference arena")                                 \
    X(TENSOR_TRAINABLE_TYPE, "a trainable tensor that is not int32 (a bias)")                    \
    X(TENSOR_PARAMS, "a trainable bias outside the parameters")                                  \
    X(TENSOR_SCALES, "per-channel scales outside DATA")                                          \
    /* OPS (tp_check_ops.c) */                                                                   \
    X(OP_FIELDS, "an unknown kind, activation or mode, or a zero point or clamp outside int8")   \
    X(OP_MULTIPLIERS_BOUNDS, "the multipliers and shifts outside DATA")                          \
    X(OP_MULTIPLIERS, "a negative multiplier or a shift outside [-31, 30]")                      \
    X(OP_OPERAND, "an operand is not a tensor of the type its position needs")                   \
    X(OP_SHAPES,                                                                                 \
      "the operands' shapes, quantization or parameter counts do not fit the op's kind")         \
    X(HELD_PARAMS_ALONE, "held_params without a held_map")                                       \
    X(HELD_KIND, "held weight rows on an op without weights")                                    \
    X(HELD_MAP_BOUNDS, "the held row map outside DATA")                                          \
    X(HELD_ROWS, "held rows not numbered 0, 1, ... in channel order, or none")                   \
    X(HELD_PARAMS, "the held rows outside the parameters")                                       \
    X(LOGITS_MADE, "no op writes the logits")                                                    \
    X(IO_TENSOR, "the input, output or logits is not an int8 activation in the arena")           \
    X(N_CLASSES, "the logits do not have n_classes elements")                                    \
    /* TRAN (tp_check_train.c) */                                                                \
    X(TRAN_HEADER, "shorter than its header")                                                    \
    X(TRAN_FIELDS, "n_tensors is not TENS's, last is no op, first is after last, or the "        \
                   "gradient format or the loss is unknown")                                     \
    X(TRAN_LENGTH, "shorter than its offsets and records")                                       \
    X(TRAN_LOSS, "the last op does not make the logits, or the logits have no gradient buffer")  \
    X(TRAN_STAGE, "training reaches into the tiled stage")                                       \
    X(TRAN_TARGET, "the mse loss's target, the input, is not the logits' size or not in the "    \
                   "training arena whole")                                                       \
    X(TRAN_ACTIVATION, "an operand of the training forward has no training-plan activation")     \
    X(TRAN_ACTIVATION_BOUNDS, "an activation outside the training arena")                        \
    X(TRAN_GRADIENT_BOUNDS, "a gradient buffer outside the training arena")                      \
    X(TRAN_GRADIENT_ALIGN, "a gradient buffer not at a multiple of 4 (a sink's sums: 8)")        \
    X(TRAN_ORDER, "records not of ascending ops in [first, last] after the tiled stage")         \
    X(TRAN_OUTPUT_GRADIENT, "the op's output has no gradient buffer")                            \
    X(TRAN_INPUT_GRADIENT, "an input gradient without a buffer, or input 1 of an op not ADD")    \
    X(TRAN_GRADIENT_OVERLAP,                                                                     \
      "an input's gradient buffer overlaps its op's output's, other than as the same "           \
      "buffer")                                                                                  \
    X(TRAN_SINK, "sink flags unknown, with float32 maps, or on an op training more than its "    \
                 "bias")                                                                         \
    X(TRAN_SINK_WRITER, "an input reduced into sums that are no sink's, or not zeroed first")    \
    X(TRAN_MASK, "the RELU mask outside the training arena")                                     \
    X(TRAN_UPDATE_KIND, "a bias or weight update on an op without weights")                      \
    X(TRAN_BIAS, "a bias update without a bias, or outside the parameters")                      \
    X(TRAN_N_SEL, "n_sel differs from the op's held rows")                                       \
    X(TRAN_SCRATCH_BOUNDS, "the backward scratch outside the training arena")                    \
    X(TRAN_SCRATCH_ALIGN, "the backward scratch not at a multiple of 4")                         \
    X(TRAN_VELOCITIES, "the optimizer state is not one float32 a trained parameter")             \
    /* SCRA and INPL (tp_check_plans.c) */                                                       \
    X(SCRATCH_LENGTH, "not its header and one record an op")                                     \
    X(SCRATCH_NONE, "a scratch of size 0 with an offset")                                        \
    X(SCRATCH_BOUNDS, "a scratch outside its plan's arena")                                      \
    X(SCRATCH_ALIGN, "a scratch offset not a multiple of 8")                                     \
    X(INPLACE_LENGTH, "not its header and its records, or reserved fields not 0")                \
    X(INPLACE_ORDER, "ops not ascending, unknown plans, or a training plan without TRAN")        \
    X(INPLACE_KIND, "an op that is not a depthwise convolution with multiplier 1")               \
    X(INPLACE_READERS, "another op reads the input it overwrites")                               \
    X(INPLACE_TRAINED, "its weights train, which reads the input it overwrites")                 \
    X(INPLACE_UNPLANNED, "a channel buffer under a plan it does not name")                       \
    X(INPLACE_STAGE, "a stage op without tile buffers for its input and output")                 \
    X(INPLACE_SHARED, "input and output not at one offset")                                      \
    X(INPLACE_BOUNDS, "the input, output or channel buffer outside the plan's arena")            \
    X(INPLACE_OVERLAP, "the channel buffer overlaps the input and output")                       \
    /* PWIG (tp_check_plans.c) */                                                                \
    X(PAIRS_LENGTH, "shorter than its header and records, or reserved fields not 0")             \
    X(PAIRS_ORDER, "ops not ascending, or a record without its op's TRAN input gradient")        \
    X(PAIRS_KIND, "an op that is not a 1x1 convolution of stride 1 without padding, its input "  \
                  "channels a multiple of 4, or no channel listed")                              \
    X(PAIRS_TRAINED, "its weights train: the pairs would be stale")                              \
    X(PAIRS_BOUNDS, "its channels and pairs outside the section, or not at a multiple of 4")     \
    X(PAIRS_CHANNELS, "channels not ascending inside the op's, or an unlisted nonzero row")      \
    X(PAIRS_WEIGHTS, "a pair's words are not the listed rows' weights")                          \
    /* LABL (tp_check_labels.c) */                                                               \
    X(LABELS_COUNT, "shorter than its header, reserved not 0, or n_labels is not n_classes")     \
    X(LABELS_TEXT, "a class name empty or not NUL-terminated inside the section")                \
    X(LABELS_TRAILING, "bytes after the last class name")                                        \
    /* TILE (tp_check_tile.c) */                                                                 \
    X(TILED_WITHOUT_TILE, "a TILED tensor in a blob without TILE")                               \
    X(TILE_HEADER, "the op or tensor count, grid, flags or length do not fit")                   \
    X(TILE_TENSOR, "a stage tensor that is not the input or its op's output, or an op a tile "   \
                   "cannot run")                                                                 \
    X(TILE_OPERAND, "a stage op reads a tensor no earlier stage tensor holds")                   \
    X(TILE_FLAGS, "a stage tensor's TILED or ARENA flag is wrong, or it is not NHWC")            \
    X(TILE_OUTSIDE, "a TILED tensor outside the stage, or read after it")                        \
    X(TILE_SPAN, "an empty span, or one past the tensor's map")                                  \
    X(TILE_COVER, "the stage output's spans do not cover its map once, in order")                \
    X(TILE_NEED, "an input window misses what its op's output window reads")                     \
    X(TILE_BUFFER, "a tile buffer smaller than its largest window, or none where one is needed") \
    X(TILE_BUFFER_BOUNDS, "a tile buffer or the band outside its plan's arena")                  \
    X(TILE_UNTRAINED, "a training-plan offset in a blob that does not train")                    \
    X(TILE_BAND, "row bands that go back or exceed the band, or band fields without them")       \
    /* the memory given to tp_session_init (tp_session.c) */                                     \
    X(ARENA_SIZE, "the arena is smaller than the blob's arena_infer")                            \
    X(ARENA_ALIGN, "the arena does not start at a multiple of TP_MEMORY_ALIGN (8)")              \
    X(PARAMS_SIZE, "the params region is smaller than the blob's params_bytes")                  \
    X(PARAMS_ALIGN, "the params region does not start at a multiple of TP_MEMORY_ALIGN (8)")

typedef enum {
#define TP_CHECK_ID(id, text) TP_CHECK_##id,
    TP_CHECKS(TP_CHECK_ID)
#undef TP_CHECK_ID
        TP_CHECK_COUNT
} tp_check_id;

/* tp_fault.section: a section's 4-byte id, little-endian; 0 for the header and table. */
#define TP_FOURCC(a, b, c, d) \
    ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
#define TP_SECTION_HEADER 0u
#define TP_SECTION_TENS TP_FOURCC('T', 'E', 'N', 'S')
#define TP_SECTION_OPS TP_FOURCC('O', 'P', 'S', ' ')
#define TP_SECTION_TRAN TP_FOURCC('T', 'R', 'A', 'N')
#define TP_SECTION_SCRA TP_FOURCC('S', 'C', 'R', 'A')
#define TP_SECTION_TILE TP_FOURCC('T', 'I', 'L', 'E')
#define TP_SECTION_INPL TP_FOURCC('I', 'N', 'P', 'L')
#define TP_SECTION_LABL TP_FOURCC('L', 'A', 'B', 'L')
#define TP_SECTION_PWIG TP_FOURCC('P', 'W', 'I', 'G')
#define TP_NO_RECORD TP_FAULT_NO_RECORD

/* Fill *fault (when not NULL) and return status. */
tp_status tp_refuse(tp_fault *fault, tp_status status, uint32_t check, uint32_t section,
                    uint32_t record, uint32_t field, const char *file, uint32_t line);

/* Refuse: TP_REFUSE(f, TP_ERR_BLOB_INVALID, OP_SHAPES, OPS, k, OPS_KIND) says check OP_SHAPES
 * failed on field kind of OPS record k; TP_REFUSE_FIELD takes the field as a tp_blob_field
 * value. Debug and fuzz builds record the check's line too. */
#if defined(TP_DEBUG) || defined(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
#define TP_REFUSE_FIELD(f, status, check, section, record, field)                                 \
    tp_refuse((f), (status), TP_CHECK_##check, TP_SECTION_##section, (record), (field), __FILE__, \
              __LINE__)
#else
#define TP_REFUSE_FIELD(f, status, check, section, record, field) \
    tp_refuse((f), (status), TP_CHECK_##check, TP_SECTION_##section, (record), (field), NULL, 0u)
#endif
#define TP_REFUSE(f, status, check, section, record, field) \
    TP_REFUSE_FIELD(f, status, check, section, record, TP_FIELD_##field)

/* offset + size inside [0, region), without overflow. */
static inline int within(uint32_t offset, uint64_t size, uint32_t region)
{
    return offset <= region && size <= (uint64_t)(region - offset);
}

/* Each family's checks, in the order tp_blob_parse runs them; each fills the fault it refuses
 * with. The header's also fills the view's sections and requirements. */
tp_status tp_check_header(tp_blob_view *v, const uint8_t *blob, uint32_t len, tp_fault *f);
tp_status tp_check_tensors(const tp_blob_view *v, tp_fault *f);
tp_status tp_check_ops(tp_blob_view *v, tp_fault *f);          /* and the input, output, logits */
tp_status tp_check_labels(const tp_blob_view *v, tp_fault *f); /* after n_classes is checked */
tp_status tp_check_tile(tp_blob_view *v, tp_fault *f);         /* sets v->stage_ops */
tp_status tp_check_train(const tp_blob_view *v, tp_fault *f);
tp_status tp_check_scratch(const tp_blob_view *v, tp_fault *f);
tp_status tp_check_inplace(const tp_blob_view *v, tp_fault *f);
tp_status tp_check_pairs(const tp_blob_view *v, tp_fault *f);

/* The largest span of stage tensor i along an axis (TILE, checked). */
uint32_t tp_tile_most_span(const tp_blob_view *v, uint32_t axis, uint32_t i);

#endif /* TP_CHECK_H */
