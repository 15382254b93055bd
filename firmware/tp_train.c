/* tp_train.c - placeholder until the training engine lands: the session runs inference only. */
#include "tp_internal.h"

tp_status tp_train_step(tp_session *s, int32_t label, tp_result *r)
{
    (void)s;
    (void)label;
    (void)r;
    return TP_ERR_NO_TRAIN;
}

tp_status tp_reset_params(tp_session *s)
{
    return tp_copy_params(s);
}

void tp_set_hparams(tp_session *s, const tp_hparams *hp)
{
    if (s != NULL && hp != NULL) {
        s->hp = *hp;
    }
}
