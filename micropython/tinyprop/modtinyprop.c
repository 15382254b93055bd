/*
 * modtinyprop.c - `import tinyprop`: the tinyprop core (firmware/) as a MicroPython module
 * (docs/micropython.md).
 *
 *   req = tinyprop.requirements(blob)          # dict, before any memory is committed
 *   s = tinyprop.Session(blob, arena=None, params=None, train=True)
 *   f.readinto(s.input()); loss, pred = s.train(label)
 *   s.camera(176, 144, tinyprop.GRAY8); pred = s.infer(frame); s.train(label, frame)
 *   link = tinyprop.Link(stream, s); link.wait(); link.metric()
 *
 * The core keeps pointers into the blob, the arena and the params region, so a Session holds
 * a reference to every object it was given and, before each call, checks that their buffers
 * have not moved or shrunk (a bytearray can be resized) and that a writable blob still passes
 * the loader's checks: a bad buffer raises tinyprop.Error instead of reaching the kernels.
 */
#include <stdarg.h>
#include <string.h>

#include "py/gc.h"
#include "py/mphal.h"
#include "py/objarray.h"
#include "py/objexcept.h"
#include "py/objstr.h"
#include "py/runtime.h"
#include "py/smallint.h"
#include "py/stream.h"

#include "tinyprop.h"
#include "tp_image.h"
#include "tp_mpy_link.h"

#if MICROPY_PY_SELECT_POSIX_OPTIMISATIONS
#include <poll.h>
#endif

#define ALIGN 8u /* the arena holds float gradients, the params region int32 biases */

/* ---- tinyprop.Error ---------------------------------------------------------------------- */

/* args = (code, name, message): str(e) is "name (code): message"; e.code and e.name too. */
static void error_print(const mp_print_t *print, mp_obj_t self_in, mp_print_kind_t kind)
{
    mp_obj_exception_t *self = MP_OBJ_TO_PTR(self_in);
    mp_print_kind_t k = kind & ~PRINT_EXC_SUBCLASS;
    if (k == PRINT_REPR || self->args == NULL || self->args->len != 3 ||
        !mp_obj_is_small_int(self->args->items[0]) || !mp_obj_is_str(self->args->items[1]) ||
        !mp_obj_is_str(self->args->items[2])) {
        mp_obj_exception_print(print, self_in, kind);
        return;
    }
    if (k == PRINT_EXC && !(kind & PRINT_EXC_SUBCLASS)) {
        mp_printf(print, "%q: ", (qstr)self->base.type->name);
    }
    mp_printf(print, "%s (%d): %s", mp_obj_str_get_str(self->args->items[1]),
              (int)MP_OBJ_SMALL_INT_VALUE(self->args->items[0]),
              mp_obj_str_get_str(self->args->items[2]));
}

static void error_attr(mp_obj_t self_in, qstr attr, mp_obj_t *dest)
{
    mp_obj_exception_t *self = MP_OBJ_TO_PTR(self_in);
    if (dest[0] == MP_OBJ_NULL && (attr == MP_QSTR_code || attr == MP_QSTR_name) &&
        self->args != NULL && self->args->len == 3) {
        dest[0] = self->args->items[attr == MP_QSTR_code ? 0 : 1];
        return;
    }
    mp_obj_exception_attr(self_in, attr, dest);
}

static MP_DEFINE_CONST_OBJ_TYPE(tinyprop_type_Error, MP_QSTR_Error, MP_TYPE_FLAG_NONE, make_new,
                                mp_obj_exception_make_new, print, error_print, attr, error_attr,
                                parent, &mp_type_Exception);

static MP_NORETURN void raise_status(tp_status st, const char *fmt, ...)
{
    vstr_t vstr;
    mp_print_t print;
    va_list ap;
    const char *name = tp_status_name(st);
    vstr_init_print(&vstr, 80, &print);
    va_start(ap, fmt);
    mp_vprintf(&print, fmt, ap);
    va_end(ap);
    mp_obj_t args[3] = {MP_OBJ_NEW_SMALL_INT(st), mp_obj_new_str(name, strlen(name)),
                        mp_obj_new_str_from_vstr(&vstr)};
    nlr_raise(mp_obj_exception_make_new(&tinyprop_type_Error, 3, 0, args));
}

/* A refusal with the core's fault line (where, what, the check: tp_fault_text) after `when`; the
 * line's leading status name is cut, the exception names it. A fault without a check (the
 * refusal recorded none) gives the status's message. */
static MP_NORETURN void raise_fault(const tp_fault *f, const char *when)
{
    size_t skip = strlen(tp_status_name(f->status)) + 2u; /* "NAME: " */
    uint32_t n = tp_fault_text(f, NULL, 0u);
    if (n <= skip) {
        raise_status(f->status, "%s%s", when, tp_status_message(f->status));
    }
    char *line = m_new(char, n + 1u);
    (void)tp_fault_text(f, line, n + 1u);
    raise_status(f->status, "%s%s", when, line + skip);
}

/* ---- buffers the core points into -------------------------------------------------------- */

typedef struct {
    mp_obj_t obj; /* the caller's object (kept alive by the session), or MP_OBJ_NULL: ours */
    uint8_t *buf; /* where the bytes were when the session was bound */
    size_t len;
} held_buffer;

static void hold(held_buffer *h, mp_obj_t obj, mp_uint_t flags)
{
    mp_buffer_info_t info;
    mp_get_buffer_raise(obj, &info, flags);
    h->obj = obj;
    h->buf = info.buf;
    h->len = info.len;
}

/* The caller's buffer must still be where, and as long as, it was bound (a bytearray that
 * grew or shrank may have moved: the core would write into freed memory). */
static void check_held(const held_buffer *h, const char *what)
{
    mp_buffer_info_t info;
    if (h->obj == MP_OBJ_NULL) {
        return;
    }
    if (!mp_get_buffer(h->obj, &info, MP_BUFFER_READ) || info.buf != h->buf || info.len != h->len) {
        raise_status(TP_ERR_ARG,
                     "the %s buffer was resized or moved after Session() (%u bytes then, %u now): "
                     "leave it alone while the session uses it, or make a new Session",
                     what, (unsigned)h->len, (unsigned)info.len);
    }
}

/* A caller's arena or params region: writable, aligned, large enough. */
static void hold_memory(held_buffer *h, mp_obj_t obj, const char *what, uint32_t need,
                        tp_status too_small)
{
    hold(h, obj, MP_BUFFER_WRITE);
    if (((uintptr_t)h->buf & (ALIGN - 1u)) != 0u) {
        raise_status(TP_ERR_ARG,
                     "the %s must start at an 8-byte boundary: pass a whole bytearray, "
                     "not a slice of one",
                     what);
    }
    if (h->len < need) {
        raise_status(too_small,
                     "the %s has %u bytes, this blob needs %u (see "
                     "tinyprop.requirements)",
                     what, (unsigned)h->len, (unsigned)need);
    }
}

/* Memory of our own, allocated once on the GC heap and kept alive by the session. */
static void alloc_memory(held_buffer *h, uint32_t n, const char *what)
{
    h->obj = MP_OBJ_NULL;
    h->len = n;
    h->buf = m_malloc_maybe(n > 0u ? n : 1u);
    if (h->buf == NULL) {
        gc_info_t info;
        gc_info(&info);
        mp_raise_msg_varg(&mp_type_MemoryError,
                          MP_ERROR_TEXT("tinyprop: no %u free bytes for the %s (largest free "
                                        "block %u of %u free): size the heap for arena + params"),
                          (unsigned)n, what, (unsigned)info.max_free, (unsigned)info.free);
    }
    memset(h->buf, 0, n);
}

/* A memoryview of n bytes at base + offset. It points at base and carries the offset, as
 * MicroPython's own slices do: the GC only follows pointers to the start of a block, so the
 * view keeps the session's memory alive even when the session itself is gone. */
static mp_obj_t view_of(uint8_t *base, size_t offset, size_t n, byte typecode, bool writable)
{
    if (writable) {
        typecode |= MP_OBJ_ARRAY_TYPECODE_FLAG_RW;
    }
    mp_obj_array_t *v = MP_OBJ_TO_PTR(mp_obj_new_memoryview(typecode, n, base));
    v->free = offset; /* objarray.c's memview_offset */
    return MP_OBJ_FROM_PTR(v);
}

/* ---- stack high-water mark --------------------------------------------------------------- */

#if MICROPY_STACK_CHECK
#define PAINT 0xA5C3A5C3u /* the bare-metal boards' pattern */
#define PAINT_MAX 16384u

typedef struct {
    uint32_t *lo, *hi; /* painted words */
} painted;

/* Paint the unused C stack below this call (at most 16 KB, never past MicroPython's stack
 * limit) so the depth a call reached can be read back, as the boards paint theirs at reset.
 * Plain loops: a library call here would push its frame into the painted words. */
static MP_NOINLINE void stack_paint(painted *p)
{
    volatile uint32_t here = 0;
    uintptr_t hi = ((uintptr_t)&here - 256u) & ~(uintptr_t)3u; /* clear of this frame */
    uintptr_t floor = (uintptr_t)MP_STATE_THREAD(stack_top) - MP_STATE_THREAD(stack_limit);
    uintptr_t lo = hi > PAINT_MAX && hi - PAINT_MAX > floor ? hi - PAINT_MAX : floor;
    lo = (lo + 3u) & ~(uintptr_t)3u;
    p->lo = p->hi = (uint32_t *)hi;
    if (lo < hi) {
        p->lo = (uint32_t *)lo;
        for (volatile uint32_t *w = p->lo; w < p->hi; w++) {
            *w = PAINT;
        }
    }
    (void)here;
}

/* Bytes from MicroPython's stack top to the deepest word written since stack_paint. */
static uint32_t stack_reached(const painted *p)
{
    const volatile uint32_t *w = p->lo;
    while (w < p->hi && *w == PAINT) {
        w++;
    }
    return (uint32_t)((uintptr_t)MP_STATE_THREAD(stack_top) - (uintptr_t)w);
}
#else
typedef int painted;
static void stack_paint(painted *p)
{
    (void)p;
}
static uint32_t stack_reached(const painted *p)
{
    (void)p;
    return 0; /* not measured: the monitor shows "not reported" */
}
#endif

/* ---- tinyprop.Session -------------------------------------------------------------------- */

typedef struct {
    mp_obj_base_t base;
    tp_session s;
    held_buffer blob, arena, params;
    bool blob_writable; /* a bytearray blob could be altered: check it again before each call */
    bool sample_ready;  /* a sample was written since the last call (a call overwrites it) */
    bool called;
    tp_mpy_call last;
    /* s.camera(): what a passed sample is. camera.width == 0: the int8 input itself; else a
     * frame of camera.width x camera.height pixels of camera.format, fitted and quantized
     * into the input tensor through pixel_table (256 bytes on the GC heap, allocated by the
     * first camera() call: a session that takes no frames does not pay for it). */
    tp_image camera;
    tp_model_image model_image;
    int8_t *pixel_table;
} session_obj_t;

static const mp_obj_type_t tinyprop_type_Session;

static mp_obj_t requirements_dict(const tp_requirements *r)
{
    static const qstr keys[] = {MP_QSTR_arena_infer, MP_QSTR_arena_train, MP_QSTR_params,
                                MP_QSTR_input_bytes, MP_QSTR_n_classes,   MP_QSTR_model_id,
                                MP_QSTR_blob_id,     MP_QSTR_optimizer};
    const uint32_t values[] = {r->arena_infer, r->arena_train, r->params,  r->input_bytes,
                               r->n_classes,   r->model_id,    r->blob_id, r->optimizer};
    mp_obj_t d = mp_obj_new_dict(MP_ARRAY_SIZE(keys));
    for (size_t i = 0; i < MP_ARRAY_SIZE(keys); i++) {
        mp_obj_dict_store(d, MP_OBJ_NEW_QSTR(keys[i]), mp_obj_new_int_from_uint(values[i]));
    }
    return d;
}

static void check_blob(const uint8_t *buf, size_t len, tp_requirements *req, const char *when)
{
    tp_fault fault = {0};
    fault.status = (uint64_t)len > UINT32_MAX ? TP_ERR_BLOB_SIZE
                                              : tp_blob_check(buf, (uint32_t)len, req, &fault);
    if (fault.status != TP_OK) {
        raise_fault(&fault, when);
    }
}

/* tinyprop.requirements(blob) -> dict: what a Session of this blob needs. */
static mp_obj_t tinyprop_requirements(mp_obj_t blob_in)
{
    mp_buffer_info_t info;
    tp_requirements req;
    mp_get_buffer_raise(blob_in, &info, MP_BUFFER_READ);
    check_blob(info.buf, info.len, &req, "");
    return requirements_dict(&req);
}
static MP_DEFINE_CONST_FUN_OBJ_1(tinyprop_requirements_obj, tinyprop_requirements);

/* Session(blob, arena=None, params=None, *, train=True) */
static mp_obj_t session_make_new(const mp_obj_type_t *type, size_t n_args, size_t n_kw,
                                 const mp_obj_t *all_args)
{
    enum { ARG_blob, ARG_arena, ARG_params, ARG_train };
    static const mp_arg_t allowed[] = {
        {MP_QSTR_blob, MP_ARG_REQUIRED | MP_ARG_OBJ, {.u_obj = MP_OBJ_NULL}},
        {MP_QSTR_arena, MP_ARG_OBJ, {.u_obj = mp_const_none}},
        {MP_QSTR_params, MP_ARG_OBJ, {.u_obj = mp_const_none}},
        {MP_QSTR_train, MP_ARG_KW_ONLY | MP_ARG_BOOL, {.u_bool = true}},
    };
    mp_arg_val_t args[MP_ARRAY_SIZE(allowed)];
    mp_arg_parse_all_kw_array(n_args, n_kw, all_args, MP_ARRAY_SIZE(allowed), allowed, args);

    session_obj_t *self = mp_obj_malloc(session_obj_t, type);
    tp_requirements req;
    mp_buffer_info_t w;
    hold(&self->blob, args[ARG_blob].u_obj, MP_BUFFER_READ);
    self->blob_writable = mp_get_buffer(self->blob.obj, &w, MP_BUFFER_WRITE);
    check_blob(self->blob.buf, self->blob.len, &req, "");

    bool train = args[ARG_train].u_bool;
    if (train && (req.arena_train == 0u || req.params == 0u)) {
        raise_status(TP_ERR_NO_TRAIN, "the blob has no training program: convert it with a "
                                      "--scheme, or pass train=False to only infer");
    }
    uint32_t arena_need = train && req.arena_train > req.arena_infer ? req.arena_train
                                                                     : req.arena_infer;
    if (args[ARG_arena].u_obj == mp_const_none) {
        alloc_memory(&self->arena, arena_need, "arena");
    } else {
        hold_memory(&self->arena, args[ARG_arena].u_obj, "arena", arena_need,
                    TP_ERR_ARENA_TOO_SMALL);
    }
    self->params.obj = MP_OBJ_NULL;
    self->params.buf = NULL;
    self->params.len = 0;
    if (train && args[ARG_params].u_obj == mp_const_none) {
        alloc_memory(&self->params, req.params, "params");
    } else if (train) {
        hold_memory(&self->params, args[ARG_params].u_obj, "params region", req.params,
                    TP_ERR_PARAMS_TOO_SMALL);
    }
    tp_status st = tp_session_init(&self->s, self->blob.buf, (uint32_t)self->blob.len,
                                   self->arena.buf, (uint32_t)self->arena.len, self->params.buf,
                                   (uint32_t)self->params.len);
    if (st != TP_OK) {
        tp_fault fault = *tp_session_fault(&self->s);
        fault.status = st; /* what it returned, whether or not a check recorded a fault */
        raise_fault(&fault, "");
    }
    /* the reference trainer's defaults: tinyprop train passes its own */
    tp_hparams hp = {0.01f, 0.0f, 0u, 0u};
    (void)tp_set_hparams(&self->s, &hp); /* valid for every blob */
    return MP_OBJ_FROM_PTR(self);
}

static void check_buffers(session_obj_t *self)
{
    check_held(&self->blob, "blob");
    check_held(&self->arena, "arena");
    check_held(&self->params, "params");
    if (self->blob_writable) {
        tp_requirements req;
        check_blob(self->blob.buf, self->blob.len, &req, "the blob changed after Session(): ");
        if (req.blob_id != self->s.b.req.blob_id) {
            raise_status(TP_ERR_ARG, "the blob buffer now holds another blob: make a new Session");
        }
    }
}

/* The model's input tensor, where every sample goes. */
static int8_t *model_input(session_obj_t *self)
{
    if (tp_input(&self->s) == NULL) {
        raise_status(TP_ERR_BAD_INPUT,
                     "this blob reads its input in row bands (convert "
                     "--input-rows), which this module does not feed: convert without it");
    }
    return tp_input(&self->s);
}

/* s.input(): the model's input tensor, a writable int8 memoryview into the arena. Write the
 * next sample into it (f.readinto(s.input()), s.input()[:] = sample), then call train() or
 * infer(): each call overwrites it, so it is asked for again before every call. */
static mp_obj_t session_input(mp_obj_t self_in)
{
    session_obj_t *self = MP_OBJ_TO_PTR(self_in);
    check_buffers(self);
    uint8_t *input = (uint8_t *)model_input(self);
    self->sample_ready = true;
    return view_of(self->arena.buf, (size_t)(input - self->arena.buf), self->s.b.req.input_bytes,
                   'b', true);
}
static MP_DEFINE_CONST_FUN_OBJ_1(session_input_obj, session_input);

/* s.output(): the output tensor of the last infer(), a read-only int8 memoryview. */
static mp_obj_t session_output(mp_obj_t self_in)
{
    session_obj_t *self = MP_OBJ_TO_PTR(self_in);
    check_buffers(self);
    if (!self->called || self->last.train) {
        raise_status(TP_ERR_ARG, "no output yet: call infer() first (a training step leaves none)");
    }
    return view_of(self->arena.buf,
                   (size_t)((const uint8_t *)tp_output(&self->s) - self->arena.buf),
                   tp_output_bytes(&self->s), 'b', false);
}
static MP_DEFINE_CONST_FUN_OBJ_1(session_output_obj, session_output);

/* ---- camera frames (s.camera) ----------------------------------------------------------- */

/* tinyprop.GRAY8, RGB888, RGB565 are tp_image_format's values. */
static const char *const format_names[3] = {"GRAY8", "RGB888", "RGB565"};
static const uint8_t format_bytes[3] = {1u, 3u, 2u};
#define CAMERA_SIDE_MAX 16384u /* a frame's size stays a 32-bit number of bytes */

static size_t frame_bytes(const tp_image *camera)
{
    return (size_t)camera->width * camera->height * format_bytes[camera->format];
}

/* s.camera(width, height, format): from now on a sample passed to train() and infer() is a
 * camera frame of width x height pixels in format (tinyprop.GRAY8, RGB888 or RGB565, rows
 * packed), which the core fits and quantizes into the input tensor as the host does
 * (tp_image.h). s.camera(None): samples are the int8 input again. */
static mp_obj_t session_camera(size_t n_args, const mp_obj_t *args)
{
    session_obj_t *self = MP_OBJ_TO_PTR(args[0]);
    if (n_args == 2 && args[1] == mp_const_none) {
        self->camera.width = 0u;
        return mp_const_none;
    }
    if (n_args != 4) {
        mp_raise_TypeError(MP_ERROR_TEXT("camera() takes width, height, format, or None"));
    }
    mp_int_t width = mp_obj_get_int(args[1]), height = mp_obj_get_int(args[2]);
    mp_int_t format = mp_obj_get_int(args[3]);
    if (format < 0 || format >= (mp_int_t)MP_ARRAY_SIZE(format_names)) {
        mp_raise_msg_varg(&mp_type_ValueError,
                          MP_ERROR_TEXT("camera format %d: unknown; use tinyprop.GRAY8, "
                                        "tinyprop.RGB888 or tinyprop.RGB565"),
                          (int)format);
    }
    if (width < 1 || height < 1 || width > (mp_int_t)CAMERA_SIDE_MAX ||
        height > (mp_int_t)CAMERA_SIDE_MAX) {
        mp_raise_msg_varg(&mp_type_ValueError,
                          MP_ERROR_TEXT("camera size %dx%d: give the frame's width and height "
                                        "in pixels, 1 to %u each"),
                          (int)width, (int)height, CAMERA_SIDE_MAX);
    }
    check_buffers(self);
    (void)model_input(self); /* a row-band blob is told so, not "not an image" */
    tp_model_image m;
    if (tp_model_image_of(&self->s, &m) != TP_OK) {
        raise_status(TP_ERR_BAD_INPUT,
                     "this model's input is not an image (int8, height x width x 1 or 3 "
                     "channels), so it takes no camera frames: pass its int8 input instead");
    }
    /* tp_image_fit's window of the model's aspect, under one pixel on a side */
    if ((uint64_t)height * m.width < m.height || (uint64_t)width * m.height < m.width) {
        mp_raise_msg_varg(&mp_type_ValueError,
                          MP_ERROR_TEXT("camera size %dx%d: too narrow for the model's "
                                        "%ux%u input; use a frame of a closer aspect"),
                          (int)width, (int)height, (unsigned)m.width, (unsigned)m.height);
    }
    if (self->pixel_table == NULL) {
        self->pixel_table = m_new(int8_t, 256);
    }
    if (tp_pixel_table(m.pixels, m.scale, m.zero_point, self->pixel_table) != TP_OK) {
        raise_status(TP_ERR_BAD_INPUT, "this model's input scale is not positive and finite, "
                                       "so no pixel maps onto its input: check the model");
    }
    self->model_image = m;
    self->camera.width = (uint32_t)width;
    self->camera.height = (uint32_t)height;
    self->camera.format = (uint32_t)format;
    self->camera.stride = (uint32_t)width * format_bytes[format];
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(session_camera_obj, 2, 4, session_camera);

/* A sample passed to train() or infer() into the input tensor: the int8 input itself, or with
 * a camera mode, a frame the core fits and quantizes into it (tp_image_input: no buffer of the
 * frame's size besides the caller's). */
static void load_sample(session_obj_t *self, mp_obj_t sample)
{
    mp_buffer_info_t info;
    int8_t *input = model_input(self);
    mp_get_buffer_raise(sample, &info, MP_BUFFER_READ);
    if (self->camera.width == 0u) {
        if (info.len != self->s.b.req.input_bytes) {
            raise_status(TP_ERR_BAD_INPUT, "the sample has %u bytes, the model's input %u",
                         (unsigned)info.len, (unsigned)self->s.b.req.input_bytes);
        }
        memmove(input, info.buf, info.len); /* it may be a view of the input */
        return;
    }
    tp_image frame = self->camera;
    if (info.len != frame_bytes(&frame)) {
        mp_raise_msg_varg(&mp_type_ValueError,
                          MP_ERROR_TEXT("the frame has %u bytes, a %ux%u %s frame %u (set by "
                                        "s.camera): capture in that mode, or call s.camera() "
                                        "with the camera's"),
                          (unsigned)info.len, (unsigned)frame.width, (unsigned)frame.height,
                          format_names[frame.format], (unsigned)frame_bytes(&frame));
    }
    frame.pixels = info.buf;
    const tp_model_image *m = &self->model_image;
    tp_status st = tp_image_input(&frame, self->pixel_table, input, m->width, m->height,
                                  m->channels);
    if (st != TP_OK) {
        raise_status(st, "the core refused the frame: a bug in the binding, please report it");
    }
}

/* Run one call of the core on the sample in the input tensor; records what METRIC reports. */
static void run(session_obj_t *self, int train, mp_int_t label, mp_obj_t sample)
{
    check_buffers(self);
    if (sample != mp_const_none) {
        load_sample(self, sample);
        self->sample_ready = true;
    }
    if (!self->sample_ready) {
        raise_status(TP_ERR_BAD_INPUT, "no new sample: write one into s.input() (or pass it) "
                                       "before every call; each call overwrites the input");
    }
    if (train && self->params.buf == NULL) {
        raise_status(TP_ERR_NO_TRAIN,
                     "this session only infers: make it with train=True to "
                     "train (it then needs the training arena and a params region)");
    }
    if (train && (label < 0 || (mp_uint_t)label >= self->s.b.req.n_classes)) {
        raise_status(TP_ERR_BAD_LABEL, "label %d out of range: the model has %u classes",
                     (int)label, (unsigned)self->s.b.req.n_classes);
    }
    tp_mpy_call c;
    painted p;
    memset(&c, 0, sizeof c);
    c.train = train;
    c.step = self->s.step;
    self->sample_ready = false; /* consumed, whatever the outcome */
    stack_paint(&p);
    mp_uint_t t0 = mp_hal_ticks_us();
    c.st = train ? tp_train_step(&self->s, (int32_t)label, &c.r) : tp_infer(&self->s, &c.r);
    c.us = (uint32_t)((mp_hal_ticks_us() - t0) & (MICROPY_PY_TIME_TICKS_PERIOD - 1));
    c.stack_peak = stack_reached(&p);
    if (c.st != TP_OK && c.st != TP_ERR_NONFINITE) {
        raise_status(c.st, "the core refused the call: a bug in the binding, please report it");
    }
    self->last = c;
    self->called = true;
}

/* s.train(label, sample=None) -> (loss, prediction). A non-finite loss skips the update
 * (s.skipped is then True) and is returned as it is. */
static mp_obj_t session_train(size_t n_args, const mp_obj_t *args)
{
    session_obj_t *self = MP_OBJ_TO_PTR(args[0]);
    run(self, 1, mp_obj_get_int(args[1]), n_args > 2 ? args[2] : mp_const_none);
    mp_obj_t out[2] = {mp_obj_new_float((mp_float_t)self->last.r.loss),
                       MP_OBJ_NEW_SMALL_INT(self->last.r.prediction)};
    return mp_obj_new_tuple(2, out);
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(session_train_obj, 2, 3, session_train);

/* s.infer(sample=None) -> prediction (the argmax of the logits); s.output() has the tensor. */
static mp_obj_t session_infer(size_t n_args, const mp_obj_t *args)
{
    session_obj_t *self = MP_OBJ_TO_PTR(args[0]);
    run(self, 0, 0, n_args > 1 ? args[1] : mp_const_none);
    return MP_OBJ_NEW_SMALL_INT(self->last.r.prediction);
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(session_infer_obj, 1, 2, session_infer);

/* s.set_hparams(*, lr=None, momentum=None, seed=None, qas=None): the given ones change. */
static mp_obj_t session_set_hparams(size_t n_args, const mp_obj_t *pos, mp_map_t *kw)
{
    enum { ARG_lr, ARG_momentum, ARG_seed, ARG_qas };
    static const mp_arg_t allowed[] = {
        {MP_QSTR_lr, MP_ARG_KW_ONLY | MP_ARG_OBJ, {.u_obj = mp_const_none}},
        {MP_QSTR_momentum, MP_ARG_KW_ONLY | MP_ARG_OBJ, {.u_obj = mp_const_none}},
        {MP_QSTR_seed, MP_ARG_KW_ONLY | MP_ARG_OBJ, {.u_obj = mp_const_none}},
        {MP_QSTR_qas, MP_ARG_KW_ONLY | MP_ARG_OBJ, {.u_obj = mp_const_none}},
    };
    session_obj_t *self = MP_OBJ_TO_PTR(pos[0]);
    mp_arg_val_t args[MP_ARRAY_SIZE(allowed)];
    mp_arg_parse_all(n_args - 1, pos + 1, kw, MP_ARRAY_SIZE(allowed), allowed, args);
    tp_hparams hp = self->s.hp;
    if (args[ARG_lr].u_obj != mp_const_none) {
        hp.lr = (float)mp_obj_get_float(args[ARG_lr].u_obj);
    }
    if (args[ARG_momentum].u_obj != mp_const_none) {
        hp.momentum = (float)mp_obj_get_float(args[ARG_momentum].u_obj);
    }
    if (args[ARG_seed].u_obj != mp_const_none) {
        hp.seed = (uint32_t)mp_obj_get_int_truncated(args[ARG_seed].u_obj);
    }
    if (args[ARG_qas].u_obj != mp_const_none) {
        hp.flags = mp_obj_is_true(args[ARG_qas].u_obj) ? hp.flags & ~TP_HP_NO_QAS
                                                       : hp.flags | TP_HP_NO_QAS;
    }
    tp_status st = tp_set_hparams(&self->s, &hp); /* its checks: the session keeps its own */
    if (st != TP_OK) {
        raise_status(st, "%s", tp_status_message(st));
    }
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_KW(session_set_hparams_obj, 1, session_set_hparams);

/* s.reset(): the blob's parameters again, optimizer state zeroed, step 0. */
static mp_obj_t session_reset(mp_obj_t self_in)
{
    session_obj_t *self = MP_OBJ_TO_PTR(self_in);
    check_buffers(self);
    (void)tp_reset_params(&self->s);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_1(session_reset_obj, session_reset);

static void session_attr(mp_obj_t self_in, qstr attr, mp_obj_t *dest)
{
    session_obj_t *self = MP_OBJ_TO_PTR(self_in);
    if (dest[0] == MP_OBJ_SENTINEL) { /* store */
        if (attr == MP_QSTR_step && dest[1] != MP_OBJ_NULL) {
            /* resuming a run: the step keys stochastic rounding */
            tp_set_step(&self->s, (uint32_t)mp_obj_get_int_truncated(dest[1]));
            dest[0] = MP_OBJ_NULL;
        }
        return;
    }
    if (dest[0] != MP_OBJ_NULL) {
        return;
    }
    switch (attr) {
    case MP_QSTR_step:
        dest[0] = mp_obj_new_int_from_uint(self->s.step);
        return;
    case MP_QSTR_arena_peak:
        dest[0] = mp_obj_new_int_from_uint(self->called ? self->last.r.arena_peak : 0u);
        return;
    case MP_QSTR_skipped:
        dest[0] = mp_obj_new_bool(self->called && self->last.st == TP_ERR_NONFINITE);
        return;
    case MP_QSTR_step_us:
        dest[0] = mp_obj_new_int_from_uint(self->called ? self->last.us : 0u);
        return;
    case MP_QSTR_stack_peak:
        dest[0] = mp_obj_new_int_from_uint(self->called ? self->last.stack_peak : 0u);
        return;
    case MP_QSTR_requirements:
        dest[0] = requirements_dict(&self->s.b.req);
        return;
    case MP_QSTR_params:
        /* the trainable parameters and any optimizer state, in place: save with
         * f.write(s.params), restore with f.readinto(s.params) and s.step */
        if (self->params.buf == NULL) {
            dest[0] = mp_const_none;
        } else {
            check_buffers(self);
            dest[0] = view_of(self->params.buf, 0, self->s.b.req.params, 'B', true);
        }
        return;
    default:
        dest[1] = MP_OBJ_SENTINEL; /* continue in locals_dict */
        return;
    }
}

static const mp_rom_map_elem_t session_locals_table[] = {
    {MP_ROM_QSTR(MP_QSTR_input), MP_ROM_PTR(&session_input_obj)},
    {MP_ROM_QSTR(MP_QSTR_camera), MP_ROM_PTR(&session_camera_obj)},
    {MP_ROM_QSTR(MP_QSTR_output), MP_ROM_PTR(&session_output_obj)},
    {MP_ROM_QSTR(MP_QSTR_train), MP_ROM_PTR(&session_train_obj)},
    {MP_ROM_QSTR(MP_QSTR_infer), MP_ROM_PTR(&session_infer_obj)},
    {MP_ROM_QSTR(MP_QSTR_set_hparams), MP_ROM_PTR(&session_set_hparams_obj)},
    {MP_ROM_QSTR(MP_QSTR_reset), MP_ROM_PTR(&session_reset_obj)},
};
static MP_DEFINE_CONST_DICT(session_locals, session_locals_table);

static MP_DEFINE_CONST_OBJ_TYPE(tinyprop_type_Session, MP_QSTR_Session, MP_TYPE_FLAG_NONE, make_new,
                                session_make_new, attr, session_attr, locals_dict, &session_locals);

/* ---- tinyprop.Link ----------------------------------------------------------------------- */

typedef struct {
    mp_obj_base_t base;
    mp_obj_t out, in; /* streams: frames go to out, HELLO comes from in */
    session_obj_t *session;
    mp_obj_t board; /* str, kept alive: the link points at its bytes */
    tp_mpy_link link;
} link_obj_t;

static void link_send(link_obj_t *self, tp_status st, const uint8_t *frame, size_t n)
{
    int err = 0;
    if (st != TP_OK || n == 0u) {
        return;
    }
    if (mp_stream_rw(self->out, (void *)frame, n, &err, MP_STREAM_RW_WRITE) != n && err != 0) {
        mp_raise_OSError(err);
    }
}

/* Link(stream, session, *, board="micropython", sram=0, input=None): frames to stream (and
 * HELLO read from it, or from input when it is another stream, e.g. sys.stdin.buffer when
 * stream is sys.stdout.buffer). sram=0 reports the GC heap's size. */
static mp_obj_t link_make_new(const mp_obj_type_t *type, size_t n_args, size_t n_kw,
                              const mp_obj_t *all_args)
{
    enum { ARG_stream, ARG_session, ARG_board, ARG_sram, ARG_input };
    static const mp_arg_t allowed[] = {
        {MP_QSTR_stream, MP_ARG_REQUIRED | MP_ARG_OBJ, {.u_obj = MP_OBJ_NULL}},
        {MP_QSTR_session, MP_ARG_REQUIRED | MP_ARG_OBJ, {.u_obj = MP_OBJ_NULL}},
        {MP_QSTR_board, MP_ARG_KW_ONLY | MP_ARG_OBJ, {.u_obj = MP_OBJ_NULL}},
        {MP_QSTR_sram, MP_ARG_KW_ONLY | MP_ARG_INT, {.u_int = 0}},
        {MP_QSTR_input, MP_ARG_KW_ONLY | MP_ARG_OBJ, {.u_obj = mp_const_none}},
    };
    mp_arg_val_t args[MP_ARRAY_SIZE(allowed)];
    mp_arg_parse_all_kw_array(n_args, n_kw, all_args, MP_ARRAY_SIZE(allowed), allowed, args);
    if (!mp_obj_is_type(args[ARG_session].u_obj, &tinyprop_type_Session)) {
        mp_raise_TypeError(MP_ERROR_TEXT("Link needs a tinyprop.Session"));
    }
    link_obj_t *self = mp_obj_malloc(link_obj_t, type);
    self->out = args[ARG_stream].u_obj;
    self->in = args[ARG_input].u_obj == mp_const_none ? self->out : args[ARG_input].u_obj;
    mp_get_stream_raise(self->out, MP_STREAM_OP_WRITE);
    mp_get_stream_raise(self->in, MP_STREAM_OP_READ);
    self->session = MP_OBJ_TO_PTR(args[ARG_session].u_obj);
    self->board = args[ARG_board].u_obj == MP_OBJ_NULL ? MP_OBJ_NEW_QSTR(MP_QSTR_micropython)
                                                       : args[ARG_board].u_obj;
    uint32_t sram = (uint32_t)args[ARG_sram].u_int;
    if (sram == 0u) {
        gc_info_t info;
        gc_info(&info);
        sram = (uint32_t)info.total;
    }
    tp_mpy_link_init(&self->link, mp_obj_str_get_str(self->board), sram);
    return MP_OBJ_FROM_PTR(self);
}

#define LINK_NOTHING (-1) /* nothing received yet */
#define LINK_ENDED (-2)   /* the input stream ended (EOF) */

/* Whether the input stream has a byte to read now (or has ended: a read then returns EOF).
 * The unix port's files have no poll ioctl (its select module polls their descriptors), so
 * there poll(2) is asked directly, as select does. */
static bool link_readable(link_obj_t *self)
{
    const mp_stream_p_t *sp = mp_get_stream(self->in);
    int err = 0;
    if (sp->ioctl == NULL) {
        return true;
    }
    mp_uint_t ready = sp->ioctl(self->in, MP_STREAM_POLL, MP_STREAM_POLL_RD, &err);
    if (ready != MP_STREAM_ERROR) {
        return (ready & (MP_STREAM_POLL_RD | MP_STREAM_POLL_HUP | MP_STREAM_POLL_ERR)) != 0;
    }
#if MICROPY_PY_SELECT_POSIX_OPTIMISATIONS
    mp_uint_t fd = sp->ioctl(self->in, MP_STREAM_GET_FILENO, 0, &err);
    if (fd != MP_STREAM_ERROR) {
        struct pollfd p = {(int)fd, POLLIN, 0};
        return poll(&p, 1, 0) != 0;
    }
#endif
    return true; /* a stream that cannot poll (a file, BytesIO) never waits */
}

#define LINK_NOTHING (-1) /* nothing received yet */
#define LINK_ENDED (-2)   /* the input stream ended (EOF) */

/* One received byte if the input stream has one now, else LINK_NOTHING or LINK_ENDED. */
static int link_read_byte(link_obj_t *self)
{
    uint8_t b;
    int err = 0;
    if (!link_readable(self)) {
        return LINK_NOTHING;
    }
    mp_uint_t n = mp_get_stream(self->in)->read(self->in, &b, 1, &err);
    if (n == MP_STREAM_ERROR) {
        if (mp_is_nonblocking_error(err)) {
            return LINK_NOTHING;
        }
        mp_raise_OSError(err);
    }
    return n == 1u ? b : LINK_ENDED;
}

/* Answer what the host sent; true once a HELLO was answered. Gives up (false) after
 * timeout_ms (-1: never) or when the input stream ends. */
static bool link_serve(link_obj_t *self, mp_int_t timeout_ms)
{
    uint8_t tx[TP_MPY_TX_BYTES];
    mp_uint_t t0 = mp_hal_ticks_ms();
    for (;;) {
        int c = link_read_byte(self);
        if (c == LINK_ENDED) {
            return false;
        }
        if (c == LINK_NOTHING) {
            if (timeout_ms >= 0 && (mp_int_t)(mp_hal_ticks_ms() - t0) >= timeout_ms) {
                return false;
            }
            mp_event_wait_ms(1);
            continue;
        }
        uint8_t b = (uint8_t)c;
        size_t used = 0, n = 0;
        int hello = tp_mpy_link_feed(&self->link, &self->session->s, &b, 1, &used, tx, sizeof tx,
                                     &n);
        link_send(self, TP_OK, tx, n);
        if (hello) {
            return true;
        }
    }
}

/* link.wait(timeout_ms=-1) -> bool: block until the host monitor's HELLO and answer READY. */
static mp_obj_t link_wait(size_t n_args, const mp_obj_t *args)
{
    link_obj_t *self = MP_OBJ_TO_PTR(args[0]);
    return mp_obj_new_bool(link_serve(self, n_args > 1 ? mp_obj_get_int(args[1]) : -1));
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(link_wait_obj, 1, 2, link_wait);

/* link.poll() -> bool: answer whatever the host has sent, without waiting (call it between
 * steps, so a monitor started later still gets its READY). */
static mp_obj_t link_poll(mp_obj_t self_in)
{
    return mp_obj_new_bool(link_serve(MP_OBJ_TO_PTR(self_in), 0));
}
static MP_DEFINE_CONST_FUN_OBJ_1(link_poll_obj, link_poll);

/* link.metric(): METRIC for the session's last train() or infer(). */
static mp_obj_t link_metric(mp_obj_t self_in)
{
    link_obj_t *self = MP_OBJ_TO_PTR(self_in);
    session_obj_t *s = self->session;
    uint8_t tx[TP_MPY_TX_BYTES];
    size_t n = 0;
    if (!s->called) {
        raise_status(TP_ERR_ARG, "no step to report yet: call train() or infer() first");
    }
    tp_mpy_call c = s->last;
    c.static_bytes = (uint32_t)(sizeof(session_obj_t) + sizeof(link_obj_t));
    tp_status st = tp_mpy_metric(&s->s, &c, tx, sizeof tx, &n);
    link_send(self, st, tx, n);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_1(link_metric_obj, link_metric);

/* link.log(text): a LOG line in the monitor (cut to 120 bytes). */
static mp_obj_t link_log(mp_obj_t self_in, mp_obj_t text_in)
{
    link_obj_t *self = MP_OBJ_TO_PTR(self_in);
    char text[TP_MPY_LOG_MAX + 1u];
    size_t len, n = 0;
    const char *src = mp_obj_str_get_data(text_in, &len);
    uint8_t tx[TP_MPY_TX_BYTES];
    len = len < TP_MPY_LOG_MAX ? len : TP_MPY_LOG_MAX;
    memcpy(text, src, len);
    text[len] = '\0';
    tp_status st = tp_proto_encode_log(tx, sizeof tx, 0u, text, &n);
    link_send(self, st, tx, n);
    return mp_const_none;
}
static MP_DEFINE_CONST_FUN_OBJ_2(link_log_obj, link_log);

static const mp_rom_map_elem_t link_locals_table[] = {
    {MP_ROM_QSTR(MP_QSTR_wait), MP_ROM_PTR(&link_wait_obj)},
    {MP_ROM_QSTR(MP_QSTR_poll), MP_ROM_PTR(&link_poll_obj)},
    {MP_ROM_QSTR(MP_QSTR_metric), MP_ROM_PTR(&link_metric_obj)},
    {MP_ROM_QSTR(MP_QSTR_log), MP_ROM_PTR(&link_log_obj)},
};
static MP_DEFINE_CONST_DICT(link_locals, link_locals_table);

static MP_DEFINE_CONST_OBJ_TYPE(tinyprop_type_Link, MP_QSTR_Link, MP_TYPE_FLAG_NONE, make_new,
                                link_make_new, locals_dict, &link_locals);

/* ---- the module -------------------------------------------------------------------------- */

/* tinyprop.crc32(data, crc=0): the CRC-32 the blobs and frames use (zlib's). */
static mp_obj_t tinyprop_crc32(size_t n_args, const mp_obj_t *args)
{
    mp_buffer_info_t info;
    mp_get_buffer_raise(args[0], &info, MP_BUFFER_READ);
    uint32_t crc = n_args > 1 ? (uint32_t)mp_obj_get_int_truncated(args[1]) : 0u;
    return mp_obj_new_int_from_uint(tp_crc32(crc, info.buf, info.len));
}
static MP_DEFINE_CONST_FUN_OBJ_VAR_BETWEEN(tinyprop_crc32_obj, 1, 2, tinyprop_crc32);

static const MP_DEFINE_STR_OBJ(tinyprop_version_obj, TP_VERSION);

static const mp_rom_map_elem_t tinyprop_module_globals_table[] = {
    {MP_ROM_QSTR(MP_QSTR___name__), MP_ROM_QSTR(MP_QSTR_tinyprop)},
    {MP_ROM_QSTR(MP_QSTR___version__), MP_ROM_PTR(&tinyprop_version_obj)},
    {MP_ROM_QSTR(MP_QSTR_requirements), MP_ROM_PTR(&tinyprop_requirements_obj)},
    {MP_ROM_QSTR(MP_QSTR_crc32), MP_ROM_PTR(&tinyprop_crc32_obj)},
    {MP_ROM_QSTR(MP_QSTR_Session), MP_ROM_PTR(&tinyprop_type_Session)},
    {MP_ROM_QSTR(MP_QSTR_Link), MP_ROM_PTR(&tinyprop_type_Link)},
    {MP_ROM_QSTR(MP_QSTR_Error), MP_ROM_PTR(&tinyprop_type_Error)},
    {MP_ROM_QSTR(MP_QSTR_GRAY8), MP_ROM_INT(TP_IMAGE_GRAY8)},
    {MP_ROM_QSTR(MP_QSTR_RGB888), MP_ROM_INT(TP_IMAGE_RGB888)},
    {MP_ROM_QSTR(MP_QSTR_RGB565), MP_ROM_INT(TP_IMAGE_RGB565BE)},
};
static MP_DEFINE_CONST_DICT(tinyprop_module_globals, tinyprop_module_globals_table);

const mp_obj_module_t tinyprop_user_cmodule = {
    .base = {&mp_type_module},
    .globals = (mp_obj_dict_t *)&tinyprop_module_globals,
};

MP_REGISTER_MODULE(MP_QSTR_tinyprop, tinyprop_user_cmodule);
