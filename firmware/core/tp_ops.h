/* tp_ops.h - every op kind, one row each: what the blob calls it, which operands it has, and
 * the names of its entries in each layer. The loader's table (blob/tp_op_checks.c), the forward
 * dispatch (tp_exec.c) and the training table (tp_train.c) are expanded from this one list, each
 * in its own layer, so an inference-only program links no training code. A new op kind is a
 * row here, its kernels, and its entries:
 *   tp_check_<name>        its operands' shapes and parameters (blob/tp_op_checks.c, the loader)
 *   tp_exec_<name>         its forward run (tp_exec.c)
 *   grad_<name>_input[_q]  its input gradient, float32 and integer maps (tp_train.c; grad 1)
 *   grad_<name>_weight[_q] a weight row's gradient (tp_train.c; weights 1)
 *
 * X(KIND, code, name, weights, inputs, grad, q_row, q_chan)
 *   KIND, code: TP_OP_<KIND>, the blob's op code (graph.OP_CODES), 1, 2, ... in row order
 *   weights: 1 when inputs[1] is its int8 weights and inputs[2] its optional int32 bias (the
 *            op can train: bias and held weight rows)
 *   inputs:  its int8 activation inputs (inputs[0], and inputs[1] when 2: no weights then)
 *   grad:    1 when it passes a gradient to its inputs; 0 when it shares its input's gradient
 *            buffer (RESHAPE) or the loss covers it (SOFTMAX)
 *   q_row, q_chan: backward scratch its integer-map input gradient needs beyond the row
 *            shifts, in bytes per element of an input row and per output channel
 * TP_OPS_EXTRA(X): rows a build adds (tests/test_op_table.py builds the core with one).
 */
#ifndef TP_OPS_H
#define TP_OPS_H

#ifndef TP_OPS_EXTRA
#define TP_OPS_EXTRA(X)
#endif

/*   KIND                code name              weights inputs grad q_row q_chan */
#define TP_OPS(X)                                            \
    X(CONV_2D, 1, conv2d, 1, 1, 1, 4, 2)                     \
    X(DEPTHWISE_CONV_2D, 2, depthwise_conv2d, 1, 1, 1, 8, 0) \
    X(FULLY_CONNECTED, 3, fully_connected, 1, 1, 1, 4, 2)    \
    X(ADD, 4, add, 0, 2, 1, 0, 0)                            \
    X(AVERAGE_POOL_2D, 5, avg_pool2d, 0, 1, 1, 0, 0)         \
    X(MEAN, 6, mean_hw, 0, 1, 1, 0, 0)                       \
    X(PAD, 7, pad, 0, 1, 1, 0, 0)                            \
    X(RESHAPE, 8, reshape, 0, 1, 0, 0, 0)                    \
    X(SOFTMAX, 9, softmax, 0, 1, 0, 0, 0)                    \
    X(MAX_POOL_2D, 10, max_pool2d, 0, 1, 1, 0, 0)            \
    TP_OPS_EXTRA(X)

#define TP_OP_KIND_ROW(KIND, code, name, weights, inputs, grad, q_row, q_chan) TP_OP_##KIND = code,
#define TP_OP_COUNT_ROW(KIND, code, name, weights, inputs, grad, q_row, q_chan) +1
typedef enum { TP_OPS(TP_OP_KIND_ROW) } tp_op_kind;
/* 1 + the rows: every table is this long and indexed by code, so a code out of 1..rows is a
 * compile error there (an index beyond the array), and so are two rows with one code
 * (-Woverride-init under -Werror) */
enum { TP_OP_KIND_COUNT = 1 TP_OPS(TP_OP_COUNT_ROW) };
#undef TP_OP_KIND_ROW
#undef TP_OP_COUNT_ROW

#endif
