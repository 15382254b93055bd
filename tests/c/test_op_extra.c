/* test_op_extra.c - an op kind added as tp_ops.h says, outside the core: the row comes from the
 * compiler (-DTP_OPS_EXTRA(X)=X(TEST_COPY, 11, test_copy, 0, 1, 0, 0, 0), tests/test_op_table.py),
 * its check and forward entry are here; nothing else in the core changes. TEST_COPY copies its
 * input like RESHAPE and shares its gradient buffer the same way, so a blob with RESHAPE's kind
 * byte set to it must run and train bit for bit as the original does.
 *
 * Usage: test_op_extra blob...  For each blob: the loader's status, then (when it accepts)
 * three training steps' loss bits and predictions, an inference's output, the params' CRC-32
 * and how many times TEST_COPY's forward entry ran. */
#include <stdio.h>
#include <string.h>

#include "tp_forward.h"

static uint32_t test_copy_runs;

int tp_check_test_copy(const tp_checked_op *c)
{
    return c->in.size == c->out.size;
}

void tp_exec_test_copy(const tp_op_run *r)
{
    const tp_act *in = r->in, *out = r->out;
    test_copy_runs++;
    if (out->data != in->data) {
        memmove(out->data, in->data,
                (size_t)out->shape.h * (size_t)out->shape.w * (size_t)out->shape.c);
    }
}

static void run(const uint8_t *blob, uint32_t len)
{
    static uint8_t arena[1u << 20], params[1u << 20];
    tp_requirements req;
    tp_session s;
    tp_result r;
    tp_hparams hp = {0.05f, 0.0f, 7u, 0u};
    tp_status st = tp_blob_requirements(blob, len, &req);
    uint32_t i, step;
    if (st == TP_OK && (req.arena_train > sizeof arena || req.params > sizeof params)) {
        st = TP_ERR_ARENA_TOO_SMALL;
    }
    if (st == TP_OK) {
        st = tp_session_init(&s, blob, len, arena, sizeof arena, params, req.params);
    }
    printf("%s", tp_status_name(st));
    if (st != TP_OK) {
        printf("\n");
        return;
    }
    test_copy_runs = 0;
    tp_set_hparams(&s, &hp);
    for (step = 0; step < 3u; step++) {
        uint32_t bits;
        for (i = 0; i < req.input_bytes; i++) {
            tp_input(&s)[i] = (int8_t)(i * 7u + step * 13u);
        }
        st = tp_train_step(&s, (int32_t)(step % req.n_classes), &r);
        memcpy(&bits, &r.loss, 4u);
        printf(" step %s %08x %d", tp_status_name(st), (unsigned)bits, (int)r.prediction);
    }
    st = tp_infer(&s, &r);
    printf(" infer %s", tp_status_name(st));
    for (i = 0; i < tp_output_bytes(&s); i++) {
        printf(" %d", tp_output(&s)[i]);
    }
    printf(" params %08x runs %u\n", (unsigned)tp_crc32(0u, params, req.params),
           (unsigned)test_copy_runs);
}

int main(int argc, char **argv)
{
    static uint8_t blob[1u << 20];
    int a;
    for (a = 1; a < argc; a++) {
        FILE *f = fopen(argv[a], "rb");
        size_t n;
        if (f == NULL) {
            fprintf(stderr, "%s: cannot open\n", argv[a]);
            return 2;
        }
        n = fread(blob, 1, sizeof blob, f);
        fclose(f);
        run(blob, (uint32_t)n);
    }
    return 0;
}
