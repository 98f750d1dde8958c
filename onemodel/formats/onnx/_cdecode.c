/*
 * _cdecode: the ONNX wire decoder of onemodel.formats.onnx.decode, in C (ONNX Part 1, Clause 12,
 * Annex B).
 *
 * This module is an optional accelerator. Its behaviour is specified by the pure-Python decoder
 * (decode._decode): the same records with the same field values and types, and the same
 * WireError (message, offset, field path segments) for the same input. Only the speed differs.
 *
 * Interface (called by decode.py only):
 *
 *   setup(schema, WireError, max_depth, numpy, Blob)
 *       Builds the message table once from schema.MESSAGES: per message its record class, the
 *       offset and default value of every slot of that class, and per field its tag, kind, wire
 *       type, form, slot offset, sub-message, oneof siblings and enumeration values. Raises
 *       TypeError when the schema or the record classes are not what this module handles (the
 *       caller then keeps the Python path). ``numpy`` may be a lazy stand-in (onemodel.lazy):
 *       no attribute of it is read until a decode first meets a float or an ARRAY field, so a
 *       model without them is decoded without importing numpy.
 *
 *       ``Blob`` is storage.blob.Blob (the class of the byte ranges made for raw_data; its
 *       slots ``source``, ``offset``, ``nbytes`` and ``_data`` are looked up here).
 *
 *   decode(data, message, raw, blob_source, tensors) -> record
 *       Decodes all of ``data`` (a C-contiguous 1-D memoryview of bytes) as the Annex B message
 *       named ``message``. ``raw(start, end)`` makes each raw_data value; else, with a
 *       ``blob_source`` (the storage Source whose bytes ``data`` are), it is
 *       ``Blob(blob_source, start, end - start)``, built as Blob.__init__ builds it (the three
 *       slots set, ``_data`` None) without running Python; else it is a slice of ``data``, which
 *       keeps the exporter of ``data`` alive. ``tensors`` (a list) receives ``(record, offset of its field key)``
 *       for every embedded TensorProto and SparseTensorProto (a sparse tensor after its values
 *       and indices).
 *
 *   first_unchecked(tensors, start, bits) -> index
 *       The index of the first ``(tensor, offset)`` pair at or after ``start`` that is not
 *       plainly valid by the rules of ir.tensor.tensor_problem (``bits[code]``: bits per element of
 *       element type ``code``, 0 for STRING and codes outside Table 5); len(tensors) when none.
 *
 * Truncation: a read past the end of the top-level message (depth 1, ``eof``: that message is
 * the whole input) says the file is truncated, with the bytes it needs and the file size, as
 * decode._decode says it; past the end of an inner message it is a malformed length.
 *
 * Memory safety: every read is checked against the end of the enclosing message; a length is
 * compared with the octets left (n > end - pos) before it is used; buffers grow only with octets
 * actually present in the input. The GIL is held throughout. The input's Py_buffer is held for
 * the whole decode and released on every path; raw_data values are Blobs of the source or slices
 * of the input memoryview object, which keep its exporter (the map, the bytes) alive.
 *
 * Records are made as cls() makes them, without running Python: tp_alloc, then every slot of
 * the class set to the default a prototype cls() showed at setup (a fresh list for list fields).
 *
 * Garbage collection: the cyclic GC is disabled while decoding (the records form a tree; there
 * is nothing for it to find, and it would traverse the heap over and over as hundreds of
 * thousands of records appear); afterwards the young objects are moved to the oldest generation
 * (gc.freeze() + gc.unfreeze(), O(1)) so that the next young collections do not walk the whole
 * new model at once. Full collections see them as usual. Skipped when something else froze
 * objects (unfreeze would undo that) and on free-threaded builds.
 *
 * Arrays: a packed float/double run that is the only contents of its ARRAY field becomes an
 * np.frombuffer view of the input (zero-copy, read-only, as on the Python path); every other
 * ARRAY value (varint runs, unpacked values, several runs, merges) is a new, writable array.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>

#include "_cslots.h"
#include <string.h>

/* wire kinds of schema.py */
enum { K_STRING, K_BYTES, K_RAW, K_INT64, K_INT32, K_UINT64, K_ENUM, K_FLOAT, K_DOUBLE,
       K_MESSAGE, K_COUNT };
static const char *const KIND_NAMES[K_COUNT] = {
    "STRING", "BYTES", "RAW", "INT64", "INT32", "UINT64", "ENUM", "FLOAT", "DOUBLE", "MESSAGE"};

/* element types of ARRAY fields */
enum { A_NONE, A_F4, A_F8, A_I4, A_I8, A_U8 };
static const int A_SIZE[] = {0, 4, 8, 4, 8, 8};

#define MAX_TAG 4096 /* the largest tag the table accepts (Annex B uses up to 26) */
#define MAX_FIELD_TAG ((1ULL << 29) - 1) /* the largest tag of a field key (protobuf.MAX_TAG) */

typedef struct {
    PyObject *proto_name;    /* str: error messages and path segments */
    Py_ssize_t off;          /* slot offset in the record */
    int kind, wire, repeated, array; /* array: A_* for an ARRAY field */
    int pend;                /* index of this field's pending state, -1 when never pending */
    int sub;                 /* message index when kind == K_MESSAGE */
    PyObject *dtype;         /* numpy dtype of an ARRAY field */
    Py_ssize_t *oneof_others; /* offsets of the other fields of its oneof group */
    int n_oneof_others;
    int64_t *enum_vals;      /* values of a closed enumeration */
    int n_enum;
    int intern;              /* a STRING whose values repeat: shared through intern_ascii */
} Field;

typedef struct {
    PyTypeObject *cls;
    PyObject *proto_name;
    int is_tensor;  /* TensorProto or SparseTensorProto: reported in ``tensors`` */
    Py_ssize_t unknown_off;
    int nslots;
    Py_ssize_t *slot_off;
    PyObject **slot_def;     /* default value, NULL for a fresh list (or an unset slot) */
    unsigned char *slot_list;
    int max_tag;
    Field **by_tag;          /* max_tag + 1 entries */
    int nfields;
    Field *fields;
    int npend;
} Msg;

/* ---- module state (set by setup) -------------------------------------------------------- */
static Msg *g_msgs = NULL;
static int g_nmsgs = 0;
static PyObject *g_names = NULL;        /* proto name -> message index */
static PyObject *g_WireError = NULL;
static PyObject *g_np = NULL;          /* the numpy module (or its lazy stand-in) */
static PyObject *g_float_value = NULL; /* schema.FLOAT_VALUE: bits -> ir.record.Float32 */
static PyObject *g_np_empty = NULL, *g_np_frombuffer = NULL;  /* NULL until ensure_np() */
static PyObject *g_scalar[2] = {NULL, NULL};  /* 1-element float32 / float64 scratch arrays */
static Py_buffer g_scalar_buf[2];
static int g_scalar_held[2] = {0, 0};
static PyObject *g_empty_bytes = NULL;
static int g_max_depth = 0;
static int g_ready = 0;   /* the table is complete */
static int g_active = 0;  /* decodes running (a raw() callback may start another one) */
static PyObject *g_gc_freeze = NULL, *g_gc_unfreeze = NULL, *g_gc_freeze_count = NULL;

#define SLOT(o, off) (*(PyObject **)((char *)(o) + (off)))

/* ---- errors --------------------------------------------------------------------------- */

/* Raise WireError(message, offset); ``message`` is stolen (may be NULL: an error is set). */
static void
wire_error(PyObject *message, Py_ssize_t offset)
{
    if (message == NULL)
        return;
    PyObject *exc = PyObject_CallFunction(g_WireError, "On", message, offset);
    Py_DECREF(message);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
}

#define WERR(offset, ...) wire_error(PyUnicode_FromFormat(__VA_ARGS__), (offset))

/* When the error set is a WireError, append the path segment of field ``f`` (``idx`` >= 0:
 * ``name[idx]``) to its ``segments``, as decode._decode does while the error passes up. */
static void
add_segment(Field *f, Py_ssize_t idx)
{
    if (!PyErr_ExceptionMatches(g_WireError))
        return;
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *v = PyErr_GetRaisedException();
#else
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
#endif
    if (v != NULL) {
        PyObject *seg = idx < 0 ? Py_NewRef(f->proto_name)
                                : PyUnicode_FromFormat("%U[%zd]", f->proto_name, idx);
        PyObject *segs = seg ? PyObject_GetAttrString(v, "segments") : NULL;
        if (segs == NULL || !PyList_Check(segs) || PyList_Append(segs, seg) < 0)
            PyErr_Clear();  /* keep the WireError; a failure here must not replace it */
        Py_XDECREF(segs);
        Py_XDECREF(seg);
    }
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(v);
#else
    PyErr_Restore(t, v, tb);
#endif
}

/* ---- wire primitives (protobuf.py) ------------------------------------------------------ */

/* read_varint: the varint at *pp; at most ten octets, at most 2^64 - 1 (Clause 12.2.2). */
static void
err_too_wide(Py_ssize_t start, uint8_t tenth)
{
    char hex[3];
    if (tenth >= 0x80) {
        WERR(start, "varint longer than 10 octets");
        return;
    }
    snprintf(hex, sizeof hex, "%02X", (unsigned)tenth);  /* (FromFormat has no %X before 3.12) */
    WERR(start, "varint encodes 2^64 or more (tenth octet 0x%s; at most 2^64 - 1, "
                "Clause 12.2.2)", hex);
}

/* A varint that runs past ``end``: at the end of the file (``eof``) the file is truncated. */
static void
err_varint_past(Py_ssize_t start, Py_ssize_t end, int eof)
{
    if (eof)
        WERR(start, "the file is truncated: it ends before the end of a varint, the file has "
                    "%zd bytes", end);
    else
        WERR(start, "varint runs past the end of its message");
}

/* The decimal text of a + b (a value below 2^65) in ``out`` (at least 22 chars): the bytes a
 * length needs, which may pass 2^64 (decode._decode computes it with Python ints). */
static const char *
sum_text(uint64_t a, uint64_t b, char *out)
{
    uint64_t lo = a + b, hi = lo < a;  /* the value is hi * 2^64 + lo */
    char tmp[24];
    int n = 0;
    do {  /* 2^64 = 10 * 1844674407370955161 + 6 */
        uint64_t r = hi * 6 + lo % 10;
        lo = hi * 1844674407370955161ULL + lo / 10 + r / 10;
        hi = 0;
        tmp[n++] = (char)('0' + r % 10);
    } while (lo != 0);
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return out;
}

static int
rd_varint_slow(const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end, int eof, uint64_t *out)
{
    Py_ssize_t start = *pp, pos = start;
    if (pos >= end) {
        err_varint_past(start, end, eof);
        return -1;
    }
    uint64_t result = b[pos] & 0x7F;
    int shift = 7;
    pos++;
    for (;;) {  /* octets 2 to 9 */
        if (pos >= end) {
            err_varint_past(start, end, eof);
            return -1;
        }
        uint8_t c = b[pos++];
        result |= (uint64_t)(c & 0x7F) << shift;  /* shift <= 56 here */
        if (c < 0x80) {
            *out = result;
            *pp = pos;
            return 0;
        }
        shift += 7;
        if (shift == 63)
            break;
    }
    /* the tenth octet holds bit 63 alone: above 1 it is 2^64 or more, or an eleventh follows */
    if (pos >= end) {
        err_varint_past(start, end, eof);
        return -1;
    }
    uint8_t c = b[pos++];
    if (c > 1) {
        err_too_wide(start, c);
        return -1;
    }
    *out = result | (uint64_t)c << 63;
    *pp = pos;
    return 0;
}

static inline int
rd_varint(const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end, int eof, uint64_t *out)
{
    Py_ssize_t pos = *pp;
    if (pos < end && b[pos] < 0x80) {
        *out = b[pos];
        *pp = pos + 1;
        return 0;
    }
    return rd_varint_slow(b, pp, end, eof, out);
}

/* skip_field: the position after a value of wire type ``wire`` (Clause 12.4); ``eof``: ``end``
 * is the end of the file (a value past it: the file is truncated). */
static int
skip_field(const uint8_t *b, Py_ssize_t *pp, Py_ssize_t end, unsigned wire, int eof)
{
    Py_ssize_t pos = *pp;
    uint64_t v;
    char need[24];
    switch (wire) {
    case 0:
        return rd_varint(b, pp, end, eof, &v);
    case 2:
        if (rd_varint(b, pp, end, eof, &v) < 0)
            return -1;
        if (v > (uint64_t)(end - *pp)) {
            if (eof)
                WERR(pos, "the file is truncated: a field of length %llu needs %s bytes, the "
                          "file has %zd", (unsigned long long)v,
                     sum_text(v, (uint64_t)*pp, need), end);
            else
                WERR(pos, "length %llu runs past the end of its message", (unsigned long long)v);
            return -1;
        }
        *pp += (Py_ssize_t)v;
        return 0;
    case 1:
        if (end - pos < 8) {
            if (eof)
                WERR(pos, "the file is truncated: a 64-bit value needs %zd bytes, the file has "
                          "%zd", pos + 8, end);
            else
                WERR(pos, "64-bit value runs past the end of its message");
            return -1;
        }
        *pp = pos + 8;
        return 0;
    case 5:
        if (end - pos < 4) {
            if (eof)
                WERR(pos, "the file is truncated: a 32-bit value needs %zd bytes, the file has "
                          "%zd", pos + 4, end);
            else
                WERR(pos, "32-bit value runs past the end of its message");
            return -1;
        }
        *pp = pos + 4;
        return 0;
    case 3:
    case 4:
        WERR(pos, "wire type %d (group) is not allowed (Clause 12.2.1)", (int)wire);
        return -1;
    default:
        WERR(pos, "invalid wire type %d", (int)wire);
        return -1;
    }
}

static inline int64_t
as_signed(uint64_t u)
{
    return u >= ((uint64_t)1 << 63) ? -(int64_t)(~u) - 1 : (int64_t)u;
}

/* decode_packed_varints: the varints of b[pos:e] into a new PyMem array (*out, *count). */
static int
packed_varints(const uint8_t *b, Py_ssize_t pos, Py_ssize_t e, uint64_t **out, Py_ssize_t *count)
{
    *out = NULL;
    *count = 0;
    if (pos == e)
        return 0;
    if (b[e - 1] >= 0x80) {
        WERR(pos, "packed run ends inside a varint");
        return -1;
    }
    Py_ssize_t n = 0;
    for (Py_ssize_t i = pos; i < e; i++)
        n += b[i] < 0x80;
    if ((size_t)n > PY_SSIZE_T_MAX / sizeof(uint64_t)) {
        PyErr_NoMemory();
        return -1;
    }
    uint64_t *vals = PyMem_Malloc((size_t)n * sizeof(uint64_t) + 1);
    if (vals == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t k = 0, p = pos;
    while (p < e) {  /* the run ends with a terminating octet, so every varint ends inside it */
        Py_ssize_t start = p;
        uint64_t r = 0;
        int shift = 0;
        for (;;) {
            uint8_t c = b[p++];
            r |= (uint64_t)(c & 0x7F) << shift;
            if (c < 0x80)
                break;
            shift += 7;
            if (shift == 63) {  /* the tenth octet holds bit 63 alone */
                c = b[p++];
                if (c > 1) {
                    PyMem_Free(vals);
                    err_too_wide(start, c);
                    return -1;
                }
                r |= (uint64_t)c << 63;
                break;
            }
        }
        vals[k++] = r;
    }
    *out = vals;
    *count = k;
    return 0;
}

/* ---- growable octet buffers -------------------------------------------------------------- */
typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int
buf_reserve(Buf *b, Py_ssize_t n)
{
    if (n > PY_SSIZE_T_MAX - b->len) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t need = b->len + n;
    if (need <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > PY_SSIZE_T_MAX / 2 ? need : cap * 2;
    char *q = PyMem_Realloc(b->p, (size_t)cap);
    if (q == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = q;
    b->cap = cap;
    return 0;
}

static int
buf_add(Buf *b, const void *src, Py_ssize_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->p + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

/* ARRAY fields gathered while a message is read, finished at its end (decode._finish_pending):
 * the elements collect in ``data``; the first part, when it is a packed float run, is kept as a
 * position until a second part comes, so that a lone run can become a view of the input. */
typedef struct {
    int nparts;
    int first_is_run;
    Py_ssize_t run_pos, run_end;
    Buf data;
} Pend;

/* ---- records ------------------------------------------------------------------------------- */

/* A new record of message ``m`` with every slot at its default, as cls() makes it. */
/* records made by the decodes running (reset by each top-level decode): promote_young runs
 * only after a decode that made PROMOTE_MIN or more */
static Py_ssize_t g_made = 0;
#define PROMOTE_MIN 10000

static PyObject *
new_record(Msg *m)
{
    PyObject *o = m->cls->tp_alloc(m->cls, 0);
    if (o == NULL)
        return NULL;
    g_made++;
    for (int i = 0; i < m->nslots; i++) {
        PyObject *v;
        if (m->slot_list[i]) {
            v = PyList_New(0);
            if (v == NULL) {
                Py_DECREF(o);
                return NULL;
            }
        }
        else {
            v = Py_XNewRef(m->slot_def[i]);
        }
        SLOT(o, m->slot_off[i]) = v;
    }
    return o;
}

static inline void
set_slot(PyObject *o, Py_ssize_t off, PyObject *v /* stolen */)
{
    PyObject *old = SLOT(o, off);
    SLOT(o, off) = v;
    Py_XDECREF(old);
}

static inline void
clear_oneof(PyObject *o, Field *f)
{
    for (int i = 0; i < f->n_oneof_others; i++)
        set_slot(o, f->oneof_others[i], Py_NewRef(Py_None));
}

static PyObject *
slot_list(PyObject *o, Field *f)
{
    PyObject *l = SLOT(o, f->off);
    if (l == NULL || !PyList_Check(l)) {
        PyErr_Format(PyExc_TypeError, "field %U of a record is not a list", f->proto_name);
        return NULL;
    }
    return l;
}

/* Store a decoded value ``v`` (stolen) of field ``f``: appended for a repeated field, else set
 * (the other members of its oneof cleared; last one wins). -1 with an exception on failure. */
static int
store_value(PyObject *o, Field *f, PyObject *v)
{
    if (f->repeated) {
        PyObject *lst = slot_list(o, f);
        int r = lst ? PyList_Append(lst, v) : -1;
        Py_DECREF(v);
        return r;
    }
    clear_oneof(o, f);
    set_slot(o, f->off, v);
    return 0;
}

/* ---- the decoder ------------------------------------------------------------------------ */
typedef struct {
    const uint8_t *buf;
    PyObject *mv;       /* the input memoryview: raw_data values are slices of it */
    PyObject *raw;      /* raw(start, end) factory, or NULL */
    PyObject *blob_src; /* the source of the Blobs made for raw_data, or NULL */
    PyObject *tensors;  /* list of (tensor, offset) */
} Dec;


/* The Blob class given to setup and its slot offsets. */
static PyTypeObject *g_blob_cls = NULL;
static Py_ssize_t g_blob_source, g_blob_offset, g_blob_nbytes, g_blob_data;

/* Take ``cls`` as the Blob class: look up its four slots (once per class). */
static int
set_blob_class(PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "Blob is not a class");
        return -1;
    }
    if ((PyTypeObject *)cls == g_blob_cls)
        return 0;
    static const char *const names[4] = {"source", "offset", "nbytes", "_data"};
    Py_ssize_t off[4];
    for (int i = 0; i < 4; i++) {
        PyObject *name = PyUnicode_FromString(names[i]);
        if (name == NULL)
            return -1;
        off[i] = slot_offset((PyTypeObject *)cls, name);
        Py_DECREF(name);
        if (off[i] < 0)
            return -1;
    }
    Py_XSETREF(g_blob_cls, (PyTypeObject *)Py_NewRef(cls));
    g_blob_source = off[0];
    g_blob_offset = off[1];
    g_blob_nbytes = off[2];
    g_blob_data = off[3];
    return 0;
}

/* Blob(source, start, end - start) of the Blob class taken by set_blob_class. */
static PyObject *
new_blob(PyObject *source, Py_ssize_t start, Py_ssize_t end)
{
    PyObject *o = g_blob_cls->tp_alloc(g_blob_cls, 0);
    if (o == NULL)
        return NULL;
    PyObject *a = PyLong_FromSsize_t(start), *n = PyLong_FromSsize_t(end - start);
    if (a == NULL || n == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(n);
        Py_DECREF(o);
        return NULL;
    }
    SLOT(o, g_blob_source) = Py_NewRef(source);
    SLOT(o, g_blob_offset) = a;
    SLOT(o, g_blob_nbytes) = n;
    SLOT(o, g_blob_data) = Py_NewRef(Py_None);
    return o;
}

static PyObject *
mv_slice(PyObject *mv, Py_ssize_t a, Py_ssize_t e)
{
    return PySequence_GetSlice(mv, a, e);
}

static int ensure_np(void);

/* One singular FLOAT value (schema.FLOAT_VALUE of its bits: no numpy) or DOUBLE value
 * (numpy.float64) with the bit pattern at ``p``. */
static PyObject *
float_scalar(int which, const uint8_t *p)
{
    if (!which) {
        uint32_t bits;
        memcpy(&bits, p, 4);
        PyObject *n = PyLong_FromUnsignedLong(bits);
        if (n == NULL)
            return NULL;
        PyObject *v = PyObject_CallOneArg(g_float_value, n);
        Py_DECREF(n);
        return v;
    }
    if (ensure_np() < 0)
        return NULL;
    memcpy(g_scalar_buf[which].buf, p, which ? 8 : 4);
    return PySequence_GetItem(g_scalar[which], 0);
}

static Pend *
get_pend(Pend **pend, Msg *m, Field *f)
{
    if (*pend == NULL) {
        *pend = PyMem_Calloc((size_t)m->npend, sizeof(Pend));
        if (*pend == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    return &(*pend)[f->pend];
}

/* Materialize a first part kept as a run position, before another part is added. */
static int
pend_spill(const uint8_t *b, Pend *p)
{
    if (p->first_is_run) {
        p->first_is_run = 0;
        return buf_add(&p->data, b + p->run_pos, p->run_end - p->run_pos);
    }
    return 0;
}

/* Append ``count`` values (uint64 bit patterns of the wire) to an ARRAY field's pending data. */
static int
pend_add_ints(const uint8_t *b, Pend *p, Field *f, const uint64_t *vals, Py_ssize_t count)
{
    if (pend_spill(b, p) < 0)
        return -1;
    int size = A_SIZE[f->array];
    if (count > PY_SSIZE_T_MAX / size) {
        PyErr_NoMemory();
        return -1;
    }
    if (buf_reserve(&p->data, count * size) < 0)
        return -1;
    char *dst = p->data.p + p->data.len;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (size == 4) {
            int32_t v = (int32_t)as_signed(vals[i]);  /* range checked before */
            memcpy(dst + 4 * i, &v, 4);
        }
        else {
            memcpy(dst + 8 * i, &vals[i], 8);
        }
    }
    p->data.len += count * size;
    p->nparts++;
    return 0;
}

static int
finish_array(Dec *d, PyObject *obj, Field *f, Pend *p)
{
    PyObject *old = SLOT(obj, f->off);
    PyObject *arr;
    if (ensure_np() < 0)
        return -1;
    if ((old == NULL || old == Py_None) && p->nparts == 1 && p->first_is_run) {
        PyObject *view = mv_slice(d->mv, p->run_pos, p->run_end);
        if (view == NULL)
            return -1;
        arr = PyObject_CallFunctionObjArgs(g_np_frombuffer, view, f->dtype, NULL);
        Py_DECREF(view);
        if (arr == NULL)
            return -1;
        set_slot(obj, f->off, arr);
        return 0;
    }
    if (pend_spill(d->buf, p) < 0)
        return -1;
    int size = A_SIZE[f->array];
    Py_buffer ob;
    int have_old = 0;
    if (old != NULL && old != Py_None) {
        if (PyObject_GetBuffer(old, &ob, PyBUF_C_CONTIGUOUS) < 0)
            return -1;
        have_old = 1;
        if (ob.len % size || p->data.len > PY_SSIZE_T_MAX - ob.len) {
            PyBuffer_Release(&ob);
            PyErr_SetString(PyExc_TypeError, "ARRAY field holds a value of another dtype");
            return -1;
        }
    }
    Py_ssize_t old_len = have_old ? ob.len : 0;
    Py_ssize_t total = old_len + p->data.len;
    arr = PyObject_CallFunction(g_np_empty, "nO", total / size, f->dtype);
    if (arr == NULL) {
        if (have_old)
            PyBuffer_Release(&ob);
        return -1;
    }
    Py_buffer ab;
    if (PyObject_GetBuffer(arr, &ab, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        if (have_old)
            PyBuffer_Release(&ob);
        Py_DECREF(arr);
        return -1;
    }
    if (ab.len != total) {
        PyBuffer_Release(&ab);
        if (have_old)
            PyBuffer_Release(&ob);
        Py_DECREF(arr);
        PyErr_SetString(PyExc_SystemError, "numpy.empty gave an array of another size");
        return -1;
    }
    if (old_len)
        memcpy(ab.buf, ob.buf, (size_t)old_len);
    if (p->data.len)
        memcpy((char *)ab.buf + old_len, p->data.p, (size_t)p->data.len);
    PyBuffer_Release(&ab);
    if (have_old)
        PyBuffer_Release(&ob);
    set_slot(obj, f->off, arr);
    return 0;
}

static int
finish_pending(Dec *d, Msg *m, PyObject *obj, Pend *pend)
{
    for (int i = 0; i < m->nfields; i++) {
        Field *f = &m->fields[i];
        if (f->pend < 0)
            continue;
        Pend *p = &pend[f->pend];
        if (p->nparts != 0 && finish_array(d, obj, f, p) < 0)
            return -1;
    }
    return 0;
}

static void
free_pending(Msg *m, Pend *pend)
{
    if (pend == NULL)
        return;
    for (int i = 0; i < m->npend; i++)
        PyMem_Free(pend[i].data.p);
    PyMem_Free(pend);
}

static int
finish_unknown(Msg *m, PyObject *obj, Buf *unk)
{
    PyObject *old = SLOT(obj, m->unknown_off);
    if (old == NULL || !PyBytes_Check(old)) {
        PyErr_SetString(PyExc_TypeError, "record field unknown is not bytes");
        return -1;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(old);
    if (unk->len > PY_SSIZE_T_MAX - n) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *nb = PyBytes_FromStringAndSize(NULL, n + unk->len);
    if (nb == NULL)
        return -1;
    memcpy(PyBytes_AS_STRING(nb), PyBytes_AS_STRING(old), (size_t)n);
    memcpy(PyBytes_AS_STRING(nb) + n, unk->p, (size_t)unk->len);
    set_slot(obj, m->unknown_off, nb);
    return 0;
}

/* Strings whose values repeat across a model (op_type, domains, attribute names, dim_param:
 * 50,000 nodes may name a dozen operators) are made once and shared: a direct-mapped cache of
 * the last ASCII value seen per hash slot, kept between decodes (at most INTERN_SLOTS short
 * strings). A shared str is the same value the decode would make (str is immutable), without an
 * allocation per record, and later dict and Counter look-ups find its hash computed. */
#define INTERN_SLOTS 512
#define INTERN_MAX 40  /* longer values are decoded as usual */
typedef struct {
    uint64_t hash;
    Py_ssize_t len;
    PyObject *str;
} InternSlot;
static InternSlot g_intern[INTERN_SLOTS];

/* *out: the str of the ``n`` octets at ``p`` when they are ASCII and short (new reference),
 * else left NULL for the caller's usual decode. -1 with an exception when out of memory. */
static int
intern_ascii(const uint8_t *p, Py_ssize_t n, PyObject **out)
{
#ifdef Py_GIL_DISABLED
    return 0;  /* the cache is not shared safely without the GIL */
#endif
    if (n > INTERN_MAX)
        return 0;
    uint64_t h = 14695981039346656037ULL;  /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p[i] & 0x80)
            return 0;
        h = (h ^ p[i]) * 1099511628211ULL;
    }
    InternSlot *slot = &g_intern[(h ^ (h >> 29)) & (INTERN_SLOTS - 1)];
    if (slot->str != NULL && slot->hash == h && slot->len == n &&
        memcmp(PyUnicode_DATA(slot->str), p, (size_t)n) == 0) {
        *out = Py_NewRef(slot->str);
        return 0;
    }
    PyObject *s = PyUnicode_New(n, 127);
    if (s == NULL)
        return -1;
    memcpy(PyUnicode_DATA(s), p, (size_t)n);
    Py_XSETREF(slot->str, Py_NewRef(s));
    slot->hash = h;
    slot->len = n;
    *out = s;
    return 0;
}

/* decode._decode: the fields of b[pos:end] into ``obj``, a record of message ``m``. */
static int
decode_msg(Dec *d, Py_ssize_t pos, Py_ssize_t end, Msg *m, PyObject *obj, int depth)
{
    const uint8_t *b = d->buf;
    Pend *pend = NULL;
    Buf unk = {NULL, 0, 0};
    int rc = -1;
    const int eof = depth == 1;  /* this message is the whole input: its end is the file's */

    while (pos < end) {
        Py_ssize_t kstart = pos;
        uint64_t k;
        if (rd_varint(b, &pos, end, eof, &k) < 0)
            goto done;
        unsigned wire = (unsigned)(k & 7);
        uint64_t tag = k >> 3;
        Field *f = tag <= (uint64_t)m->max_tag ? m->by_tag[tag] : NULL;
        if (f == NULL || ((unsigned)f->wire != wire &&
                          !(f->repeated && wire == 2 && f->wire != 2))) {
            if (tag == 0) {
                WERR(kstart, "field tag 0 is not allowed (Clause 12.3.1)");
                goto done;
            }
            if (tag > MAX_FIELD_TAG) {
                WERR(kstart, "field tag %llu is above 536870911 (2^29 - 1), the largest tag",
                     (unsigned long long)tag);
                goto done;
            }
            if (wire == 3 || wire == 4) {
                WERR(kstart, "wire type %d (group) is not allowed (Clause 12.2.1)", (int)wire);
                goto done;
            }
            if (wire > 5) {
                WERR(kstart, "invalid wire type %d", (int)wire);
                goto done;
            }
            if (skip_field(b, &pos, end, wire, eof) < 0 || buf_add(&unk, b + kstart, pos - kstart) < 0)
                goto done;
            continue;
        }
        int kind = f->kind;
        if (wire == 2) {
            uint64_t n;
            if (rd_varint(b, &pos, end, eof, &n) < 0) {
                add_segment(f, -1);
                goto done;
            }
            if (n > (uint64_t)(end - pos)) {
                char need[24];
                if (eof)
                    WERR(kstart, "the file is truncated: field %U (length %llu) needs %s bytes, "
                                 "the file has %zd", f->proto_name, (unsigned long long)n,
                         sum_text(n, (uint64_t)pos, need), end);
                else
                    WERR(kstart, "length %llu of field %U runs past the end of its message",
                         (unsigned long long)n, f->proto_name);
                add_segment(f, -1);
                goto done;
            }
            Py_ssize_t e = pos + (Py_ssize_t)n;
            PyObject *v;
            switch (kind) {
            case K_STRING:
                v = NULL;
                if (f->intern && intern_ascii(b + pos, e - pos, &v) < 0)
                    goto done;
                if (v == NULL)
                    v = PyUnicode_DecodeUTF8((const char *)b + pos, e - pos, "surrogateescape");
                if (v == NULL || store_value(obj, f, v) < 0)
                    goto done;
                break;
            case K_MESSAGE: {
                if (depth >= g_max_depth) {
                    WERR(kstart, "messages nested deeper than %d", g_max_depth);
                    goto done;
                }
                Msg *sm = &g_msgs[f->sub];
                PyObject *sub;
                Py_ssize_t idx = -1;
                if (f->repeated) {
                    PyObject *lst = slot_list(obj, f);
                    if (lst == NULL)
                        goto done;
                    sub = new_record(sm);
                    if (sub == NULL)
                        goto done;
                    if (PyList_Append(lst, sub) < 0) {
                        Py_DECREF(sub);
                        goto done;
                    }
                    idx = PyList_GET_SIZE(lst) - 1;
                }
                else {
                    sub = SLOT(obj, f->off);
                    if (sub == NULL || sub == Py_None) {
                        clear_oneof(obj, f);
                        sub = new_record(sm);
                        if (sub == NULL)
                            goto done;
                        set_slot(obj, f->off, Py_NewRef(sub));
                    }
                    else if (Py_TYPE(sub) != sm->cls) {  /* never: we made it; slots need it */
                        PyErr_Format(PyExc_TypeError, "field %U holds a record of another type",
                                     f->proto_name);
                        goto done;
                    }
                    else {
                        Py_INCREF(sub);
                    }
                }
                if (decode_msg(d, pos, e, sm, sub, depth + 1) < 0) {
                    add_segment(f, idx);
                    Py_DECREF(sub);
                    goto done;
                }
                if (sm->is_tensor) {
                    PyObject *item = Py_BuildValue("(On)", sub, kstart);
                    int r = item ? PyList_Append(d->tensors, item) : -1;
                    Py_XDECREF(item);
                    if (r < 0) {
                        Py_DECREF(sub);
                        goto done;
                    }
                }
                Py_DECREF(sub);
                break;
            }
            case K_BYTES:
                v = PyBytes_FromStringAndSize((const char *)b + pos, e - pos);
                if (v == NULL || store_value(obj, f, v) < 0)
                    goto done;
                break;
            case K_RAW:
                if (d->raw != NULL)
                    v = PyObject_CallFunction(d->raw, "nn", pos, e);
                else if (d->blob_src != NULL)
                    v = new_blob(d->blob_src, pos, e);
                else
                    v = mv_slice(d->mv, pos, e);
                if (v == NULL)
                    goto done;
                set_slot(obj, f->off, v);
                break;
            case K_FLOAT:
            case K_DOUBLE: {  /* a packed run of an ARRAY field */
                int width = kind == K_FLOAT ? 4 : 8;
                if (n % width) {
                    WERR(kstart, "packed %U of %llu octets is not a multiple of %d",
                         f->proto_name, (unsigned long long)n, width);
                    add_segment(f, -1);
                    goto done;
                }
                Pend *p = get_pend(&pend, m, f);
                if (p == NULL)
                    goto done;
                if (p->nparts == 0 && !p->first_is_run) {
                    p->first_is_run = 1;
                    p->run_pos = pos;
                    p->run_end = e;
                }
                else if (pend_spill(b, p) < 0 || buf_add(&p->data, b + pos, e - pos) < 0) {
                    goto done;
                }
                p->nparts++;
                break;
            }
            default: {  /* a packed run of varints */
                uint64_t *vals;
                Py_ssize_t count;
                if (packed_varints(b, pos, e, &vals, &count) < 0) {
                    add_segment(f, -1);
                    goto done;
                }
                if (kind == K_INT32 || kind == K_ENUM) {
                    for (Py_ssize_t i = 0; i < count; i++) {
                        int64_t s = as_signed(vals[i]);
                        if (s < INT32_MIN || s > INT32_MAX) {
                            PyMem_Free(vals);
                            WERR(kstart, "int32 field %U out of range", f->proto_name);
                            add_segment(f, -1);
                            goto done;
                        }
                    }
                }
                int r = 0;
                if (f->array != A_NONE) {
                    Pend *p = get_pend(&pend, m, f);
                    r = p == NULL ? -1 : pend_add_ints(b, p, f, vals, count);
                }
                else {  /* a list field (dims, ints, ...): the values in order of appearance */
                    PyObject *lst = slot_list(obj, f);
                    r = lst == NULL ? -1 : 0;
                    for (Py_ssize_t i = 0; r == 0 && i < count; i++) {
                        PyObject *iv = kind == K_UINT64
                                           ? PyLong_FromUnsignedLongLong(vals[i])
                                           : PyLong_FromLongLong(as_signed(vals[i]));
                        r = iv ? PyList_Append(lst, iv) : -1;
                        Py_XDECREF(iv);
                    }
                }
                PyMem_Free(vals);
                if (r < 0)
                    goto done;
                break;
            }
            }
            pos = e;
            continue;
        }

        /* wire types 0, 1, 5: one scalar value */
        PyObject *v = NULL;
        if (wire == 0) {
            uint64_t u;
            if (rd_varint(b, &pos, end, eof, &u) < 0) {
                add_segment(f, -1);
                goto done;
            }
            if (kind != K_UINT64) {
                int64_t s = as_signed(u);
                if (kind != K_INT64 && (s < INT32_MIN || s > INT32_MAX)) {
                    WERR(kstart, "int32 field %U out of range: %lld", f->proto_name,
                         (long long)s);
                    add_segment(f, -1);
                    goto done;
                }
                if (kind == K_ENUM) {
                    int found = 0;
                    for (int i = 0; i < f->n_enum; i++)
                        found |= f->enum_vals[i] == s;
                    if (!found) {  /* a closed enumeration keeps other values as unknown */
                        if (buf_add(&unk, b + kstart, pos - kstart) < 0)
                            goto done;
                        continue;
                    }
                }
            }
            if (f->repeated && f->array != A_NONE) {
                Pend *p = get_pend(&pend, m, f);
                if (p == NULL || pend_add_ints(b, p, f, &u, 1) < 0)
                    goto done;
                continue;
            }
            v = kind == K_UINT64 ? PyLong_FromUnsignedLongLong(u)
                                 : PyLong_FromLongLong(as_signed(u));
        }
        else {
            int width = wire == 5 ? 4 : 8;
            if (end - pos < width) {
                if (eof)
                    WERR(kstart, "the file is truncated: field %U (a %d-bit value) needs %zd "
                                 "bytes, the file has %zd", f->proto_name, width * 8, pos + width,
                         end);
                else
                    WERR(kstart, "field %U runs past the end of its message", f->proto_name);
                add_segment(f, -1);
                goto done;
            }
            if (f->repeated) {  /* setup admits repeated floats only as ARRAY fields */
                Pend *p = get_pend(&pend, m, f);
                if (p == NULL || pend_spill(b, p) < 0 || buf_add(&p->data, b + pos, width) < 0)
                    goto done;
                p->nparts++;
                pos += width;
                continue;
            }
            v = float_scalar(width == 8, b + pos);
            pos += width;
        }
        if (v == NULL || store_value(obj, f, v) < 0)
            goto done;
    }
    if (unk.len && finish_unknown(m, obj, &unk) < 0)
        goto done;
    if (pend != NULL && finish_pending(d, m, obj, pend) < 0)
        goto done;
    rc = 0;
done:
    free_pending(m, pend);
    PyMem_Free(unk.p);
    return rc;
}

/* Move the objects the decode made (and any other young ones) to the oldest GC generation, so
 * the next young collections do not traverse the whole model right away; they are still
 * collected as usual by full collections. gc.freeze() + gc.unfreeze() does exactly that in O(1);
 * it is skipped when someone else froze objects (gc.get_freeze_count() > 0), whose freeze
 * unfreeze() would undo. gc.get_freeze_count() walks the frozen objects (O(n): 100 us after the
 * command line's gc.freeze() of its modules), so the caller asks only after a decode of
 * PROMOTE_MIN records or more, where young collections would cost more than that; a small
 * model's records are left to them (a scan of 1,000 small models: 0.1 s less). */
static int
promote_young(void)
{
#ifdef Py_GIL_DISABLED
    return 0;  /* there, freezing walks the whole heap */
#endif
    if (g_gc_freeze == NULL)
        return 0;
    PyObject *n = PyObject_CallNoArgs(g_gc_freeze_count);
    if (n == NULL)
        return -1;
    long frozen = PyLong_AsLong(n);
    Py_DECREF(n);
    if (frozen == -1 && PyErr_Occurred())
        return -1;
    if (frozen != 0)
        return 0;
    PyObject *r = PyObject_CallNoArgs(g_gc_freeze);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    r = PyObject_CallNoArgs(g_gc_unfreeze);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *
cdecode_decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "decode(data, message, raw, blob_source, tensors)");
        return NULL;
    }
    if (!g_ready) {
        PyErr_SetString(PyExc_RuntimeError, "_cdecode.setup() was not called");
        return NULL;
    }
    PyObject *mv = args[0], *name = args[1], *tensors = args[4];
    if (!PyMemoryView_Check(mv)) {
        PyErr_SetString(PyExc_TypeError, "data must be a memoryview");
        return NULL;
    }
    Py_buffer *info = PyMemoryView_GET_BUFFER(mv);
    if (info->ndim != 1 || info->itemsize != 1) {
        PyErr_SetString(PyExc_TypeError, "data must be a 1-D memoryview of octets");
        return NULL;
    }
    if (!PyList_Check(tensors)) {
        PyErr_SetString(PyExc_TypeError, "tensors must be a list");
        return NULL;
    }
    PyObject *idx = PyDict_GetItemWithError(g_names, name);
    if (idx == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_KeyError, "%R", name);
        return NULL;
    }
    Msg *m = &g_msgs[PyLong_AsLong(idx)];
    PyObject *blob_src = args[3] == Py_None ? NULL : args[3];
    Py_buffer view;
    if (PyObject_GetBuffer(mv, &view, PyBUF_SIMPLE) < 0)  /* fails unless contiguous */
        return NULL;
    Dec d = {(const uint8_t *)view.buf, mv, args[2] == Py_None ? NULL : args[2], blob_src,
             tensors};
    /* The records form a tree and decoding makes no cycles, so the cyclic GC has nothing to
     * find while it runs; left on, it would traverse the whole heap several times over (the
     * records are hundreds of thousands of tracked objects). It is off for the duration. */
    int gc_was = PyGC_Disable();
    if (g_active == 0)
        g_made = 0;
    g_active++;
    PyObject *obj = new_record(m);
    if (obj != NULL && decode_msg(&d, 0, view.len, m, obj, 1) < 0)
        Py_CLEAR(obj);
    g_active--;
    if (gc_was)
        PyGC_Enable();
    PyBuffer_Release(&view);
    if (obj != NULL && gc_was && g_active == 0 && g_made >= PROMOTE_MIN && promote_young() < 0)
        Py_CLEAR(obj);
    return obj;
}

/* ---- post-decode tensor checks: the plainly valid tensors --------------------------------- */

/* first_unchecked(tensors, start, bits): index of the first (tensor, offset) at or after
 * ``start`` that ir.tensor.tensor_problem (or sparse_problem) has to look at. A tensor is passed over here only when it
 * is plainly valid: dims a list of ints in [0, 2**31), data_type a code with ``bits[code] > 0``
 * (Table 5, not STRING), raw_data a bytes, a memoryview or a Blob (of the class setup took) of
 * exactly ceil(count * bits / 8) octets, every typed field None, string_data empty, segment and data_location None. */
static PyObject *
cdecode_first_unchecked(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyList_Check(args[0]) || !PyBytes_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "first_unchecked(tensors: list, start: int, bits: bytes)");
        return NULL;
    }
    if (!g_ready) {
        PyErr_SetString(PyExc_RuntimeError, "_cdecode.setup() was not called");
        return NULL;
    }
    PyObject *tensors = args[0];
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred())
        return NULL;
    const unsigned char *bits = (const unsigned char *)PyBytes_AS_STRING(args[2]);
    Py_ssize_t nbits = PyBytes_GET_SIZE(args[2]);
    PyObject *ti = PyDict_GetItemString(g_names, "TensorProto");
    if (ti == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no TensorProto in the table");
        return NULL;
    }
    Msg *m = &g_msgs[PyLong_AsLong(ti)];
    /* slot offsets of the fields looked at, from the table */
    Py_ssize_t o_dims = -1, o_type = -1, o_raw = -1, o_str = -1, o_seg = -1, o_loc = -1;
    Py_ssize_t o_typed[8];
    int n_typed = 0;
    for (int i = 0; i < m->nfields; i++) {
        Field *f = &m->fields[i];
        const char *nm = PyUnicode_AsUTF8(f->proto_name);
        if (nm == NULL)
            return NULL;
        if (!strcmp(nm, "dims")) o_dims = f->off;
        else if (!strcmp(nm, "data_type")) o_type = f->off;
        else if (!strcmp(nm, "raw_data")) o_raw = f->off;
        else if (!strcmp(nm, "string_data")) o_str = f->off;
        else if (!strcmp(nm, "segment")) o_seg = f->off;
        else if (!strcmp(nm, "data_location")) o_loc = f->off;
        else if (f->array != A_NONE && n_typed < 8) o_typed[n_typed++] = f->off;
    }
    if (o_dims < 0 || o_type < 0 || o_raw < 0 || o_str < 0 || o_seg < 0 || o_loc < 0) {
        PyErr_SetString(PyExc_RuntimeError, "TensorProto lacks a field the check needs");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(tensors), i;
    for (i = start < 0 ? 0 : start; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(tensors, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2)
            break;
        PyObject *t = PyTuple_GET_ITEM(pair, 0);
        if (Py_TYPE(t) != m->cls)
            break;
        PyObject *dims = SLOT(t, o_dims), *dt = SLOT(t, o_type), *raw = SLOT(t, o_raw);
        PyObject *strs = SLOT(t, o_str);
        if (dims == NULL || !PyList_CheckExact(dims) || dt == NULL || !PyLong_CheckExact(dt) ||
            raw == NULL || SLOT(t, o_seg) != Py_None || SLOT(t, o_loc) != Py_None ||
            strs == NULL || !PyList_CheckExact(strs) || PyList_GET_SIZE(strs) != 0)
            break;
        int typed = 0;
        for (int j = 0; j < n_typed; j++)
            typed |= SLOT(t, o_typed[j]) != Py_None;
        if (typed)
            break;
        int overflow;
        long code = PyLong_AsLongAndOverflow(dt, &overflow);
        if (overflow || code <= 0 || code >= nbits || bits[code] == 0)
            break;
        /* element count; every dim below 2**31 and at most 2 dims over 2**20 keep it exact */
        uint64_t count = 1;
        int ok = 1;
        Py_ssize_t nd = PyList_GET_SIZE(dims);
        for (Py_ssize_t j = 0; j < nd && ok; j++) {
            PyObject *dv = PyList_GET_ITEM(dims, j);
            if (!PyLong_CheckExact(dv)) {
                ok = 0;
                break;
            }
            long long x = PyLong_AsLongLongAndOverflow(dv, &overflow);
            if (overflow || x < 0 || x >= ((long long)1 << 31)) {
                ok = 0;
                break;
            }
            if (x != 0 && count > (((uint64_t)1 << 50) / (uint64_t)x))
                ok = 0;  /* large: leave it to the Python check */
            else
                count *= (uint64_t)x;
        }
        if (!ok)
            break;
        uint64_t want = (count * bits[code] + 7) / 8;
        Py_ssize_t have;
        if (PyMemoryView_Check(raw) && PyMemoryView_GET_BUFFER(raw)->ndim == 1 &&
            PyMemoryView_GET_BUFFER(raw)->itemsize == 1)
            have = PyMemoryView_GET_BUFFER(raw)->len;
        else if (PyBytes_CheckExact(raw))
            have = PyBytes_GET_SIZE(raw);
        else if (g_blob_cls != NULL && Py_TYPE(raw) == g_blob_cls &&
                 PyLong_CheckExact(SLOT(raw, g_blob_nbytes))) {
            have = PyLong_AsSsize_t(SLOT(raw, g_blob_nbytes));
            if (have == -1 && PyErr_Occurred())
                return NULL;
        }
        else
            break;
        if ((uint64_t)have != want)
            break;
    }
    return PyLong_FromSsize_t(i);
}

/* ---- setup ------------------------------------------------------------------------------- */

static void
free_table(void)
{
    if (g_msgs != NULL) {
        for (int i = 0; i < g_nmsgs; i++) {
            Msg *m = &g_msgs[i];
            Py_XDECREF(m->cls);
            Py_XDECREF(m->proto_name);
            if (m->slot_def != NULL)
                for (int j = 0; j < m->nslots; j++)
                    Py_XDECREF(m->slot_def[j]);
            PyMem_Free(m->slot_def);
            PyMem_Free(m->slot_off);
            PyMem_Free(m->slot_list);
            PyMem_Free(m->by_tag);
            if (m->fields != NULL)
                for (int j = 0; j < m->nfields; j++) {
                    Py_XDECREF(m->fields[j].proto_name);
                    Py_XDECREF(m->fields[j].dtype);
                    PyMem_Free(m->fields[j].oneof_others);
                    PyMem_Free(m->fields[j].enum_vals);
                }
            PyMem_Free(m->fields);
        }
        PyMem_Free(g_msgs);
        g_msgs = NULL;
    }
    g_nmsgs = 0;
    Py_CLEAR(g_names);
    Py_CLEAR(g_WireError);
    Py_CLEAR(g_np);
    Py_CLEAR(g_float_value);
    Py_CLEAR(g_np_empty);
    Py_CLEAR(g_np_frombuffer);
    for (int i = 0; i < 2; i++) {
        if (g_scalar_held[i])
            PyBuffer_Release(&g_scalar_buf[i]);
        g_scalar_held[i] = 0;
        Py_CLEAR(g_scalar[i]);
    }
    Py_CLEAR(g_empty_bytes);
    for (int i = 0; i < INTERN_SLOTS; i++)
        Py_CLEAR(g_intern[i].str);
    Py_CLEAR(g_gc_freeze);
    Py_CLEAR(g_gc_unfreeze);
    Py_CLEAR(g_gc_freeze_count);
}

static long
attr_long(PyObject *o, const char *name)
{
    PyObject *v = PyObject_GetAttrString(o, name);
    if (v == NULL)
        return -1;
    long r = PyLong_AsLong(v);
    Py_DECREF(v);
    if (r == -1 && !PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "%s is -1", name);
    return r;
}

static int
attr_bool(PyObject *o, const char *name)
{
    PyObject *v = PyObject_GetAttrString(o, name);
    if (v == NULL)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* Every slot of ``cls`` (all classes of its MRO) with the default value cls() gives it. */
static int
setup_slots(Msg *m)
{
    PyTypeObject *cls = m->cls;
    PyObject *proto = NULL, *offs = PyList_New(0);
    if (offs == NULL)
        return -1;
    PyObject *mro = cls->tp_mro;
    if (mro == NULL || !PyTuple_Check(mro))
        goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *t = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        PyObject *dict = t->tp_dict;
        if (dict == NULL)
            continue;
        PyObject *key, *val;
        Py_ssize_t p = 0;
        while (PyDict_Next(dict, &p, &key, &val)) {
            if (!Py_IS_TYPE(val, &PyMemberDescr_Type))
                continue;
            PyMemberDef *md = ((PyMemberDescrObject *)val)->d_member;
            if (md->type != T_OBJECT_EX)
                continue;  /* __weakref__ and the like */
            if (md->flags & READONLY || md->offset < (Py_ssize_t)sizeof(PyObject) ||
                md->offset + (Py_ssize_t)sizeof(PyObject *) > cls->tp_basicsize) {
                PyErr_Format(PyExc_TypeError, "%s: unexpected member %U", cls->tp_name, key);
                goto fail;
            }
            PyObject *o = PyLong_FromSsize_t(md->offset);
            if (o == NULL || PyList_Append(offs, o) < 0) {
                Py_XDECREF(o);
                goto fail;
            }
            Py_DECREF(o);
        }
    }
    /* cls() must be the plain record construction this module repeats */
    if (cls->tp_new != PyBaseObject_Type.tp_new) {
        PyErr_Format(PyExc_TypeError, "%s has its own __new__", cls->tp_name);
        goto fail;
    }
    {
        PyObject *init = PyObject_GetAttrString((PyObject *)cls, "__init__");
        PyObject *fast = init ? PyObject_GetAttrString((PyObject *)cls, "_fast_init") : NULL;
        int same = init != NULL && fast != NULL && init == fast;
        Py_XDECREF(init);
        Py_XDECREF(fast);
        if (!same) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "%s has its own __init__", cls->tp_name);
            goto fail;
        }
    }
    proto = PyObject_CallNoArgs((PyObject *)cls);
    if (proto == NULL)
        goto fail;
    m->nslots = (int)PyList_GET_SIZE(offs);
    m->slot_off = PyMem_Calloc((size_t)m->nslots + 1, sizeof(Py_ssize_t));
    m->slot_def = PyMem_Calloc((size_t)m->nslots + 1, sizeof(PyObject *));
    m->slot_list = PyMem_Calloc((size_t)m->nslots + 1, 1);
    if (m->slot_off == NULL || m->slot_def == NULL || m->slot_list == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int i = 0; i < m->nslots; i++) {
        Py_ssize_t off = PyLong_AsSsize_t(PyList_GET_ITEM(offs, i));
        m->slot_off[i] = off;
        PyObject *v = SLOT(proto, off);
        if (v == NULL || v == Py_None || PyBytes_CheckExact(v) || PyLong_CheckExact(v) ||
            PyUnicode_CheckExact(v) || PyFloat_CheckExact(v) || PyBool_Check(v)) {
            m->slot_def[i] = Py_XNewRef(v);  /* immutable: shared, as the literal default is */
        }
        else if (PyList_CheckExact(v) && PyList_GET_SIZE(v) == 0) {
            m->slot_list[i] = 1;
        }
        else {
            PyErr_Format(PyExc_TypeError, "%s: a default of type %s", cls->tp_name,
                         Py_TYPE(v)->tp_name);
            goto fail;
        }
    }
    Py_DECREF(proto);
    Py_DECREF(offs);
    return 0;
fail:
    Py_XDECREF(proto);
    Py_DECREF(offs);
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "record class without an MRO");
    return -1;
}

static int
dtype_code(PyObject *dtype)
{
    /* a dtype spelling ("<f4") or a numpy dtype (its .str) */
    PyObject *s = PyUnicode_Check(dtype) ? Py_NewRef(dtype) : PyObject_GetAttrString(dtype, "str");
    if (s == NULL)
        return -1;
    const char *c = PyUnicode_AsUTF8(s);
    int r = -1;
    if (c != NULL) {
        if (!strcmp(c, "<f4")) r = A_F4;
        else if (!strcmp(c, "<f8")) r = A_F8;
        else if (!strcmp(c, "<i4")) r = A_I4;
        else if (!strcmp(c, "<i8")) r = A_I8;
        else if (!strcmp(c, "<u8")) r = A_U8;
        else PyErr_Format(PyExc_TypeError, "unsupported ARRAY dtype %s", c);
    }
    Py_DECREF(s);
    return r;
}

static int
setup_field(Msg *m, Field *f, PyObject *pf, PyObject *messages)
{
    long tag = attr_long(pf, "tag");
    long kind = tag < 0 ? -1 : attr_long(pf, "kind");
    long wire = kind < 0 ? -1 : attr_long(pf, "wire");
    if (wire < 0)
        return -1;
    if (tag < 1 || tag > MAX_TAG || kind >= K_COUNT || wire > 5) {
        PyErr_SetString(PyExc_TypeError, "field tag, kind or wire out of range");
        return -1;
    }
    f->kind = (int)kind;
    f->wire = (int)wire;
    f->pend = -1;
    f->sub = -1;
    if ((f->repeated = attr_bool(pf, "repeated")) < 0)
        return -1;
    if ((f->proto_name = PyObject_GetAttrString(pf, "proto_name")) == NULL)
        return -1;
    if (!PyUnicode_Check(f->proto_name)) {
        PyErr_SetString(PyExc_TypeError, "proto_name is not a str");
        return -1;
    }
    /* the strings that name rather than identify: the same few values over and over */
    static const char *const INTERNED[][2] = {
        {"NodeProto", "op_type"}, {"NodeProto", "domain"}, {"AttributeProto", "name"},
        {"OperatorSetIdProto", "domain"}, {"TensorShapeProto.Dimension", "dim_param"},
        {"FunctionProto", "domain"}};
    f->intern = 0;
    for (size_t i = 0; kind == K_STRING && i < sizeof INTERNED / sizeof INTERNED[0]; i++)
        if (PyUnicode_CompareWithASCIIString(m->proto_name, INTERNED[i][0]) == 0 &&
            PyUnicode_CompareWithASCIIString(f->proto_name, INTERNED[i][1]) == 0)
            f->intern = 1;
    PyObject *name = PyObject_GetAttrString(pf, "name");
    if (name == NULL)
        return -1;
    f->off = slot_offset(m->cls, name);
    Py_DECREF(name);
    if (f->off < 0)
        return -1;
    if (m->by_tag[tag] != NULL) {
        PyErr_SetString(PyExc_TypeError, "tag used twice");
        return -1;
    }
    m->by_tag[tag] = f;

    PyObject *dtype = PyObject_GetAttrString(pf, "array_dtype");
    if (dtype == NULL)
        return -1;
    if (dtype != Py_None) {
        f->array = dtype_code(dtype);
        if (f->array < 0) {
            Py_DECREF(dtype);
            return -1;
        }
        f->dtype = dtype;
    }
    else {
        f->array = A_NONE;
        Py_DECREF(dtype);
    }
    /* the combinations decode._decode meets in Annex B; anything else stays on that path */
    static const int ARRAY_OF[K_COUNT] = {[K_INT64] = A_I8, [K_INT32] = A_I4, [K_UINT64] = A_U8,
                                          [K_FLOAT] = A_F4, [K_DOUBLE] = A_F8};
    static const int WIRE_OF[K_COUNT] = {2, 2, 2, 0, 0, 0, 0, 5, 1, 2};
    if (f->wire != WIRE_OF[kind] ||
        (f->array != A_NONE && (!f->repeated || ARRAY_OF[kind] != f->array)) ||
        (f->repeated && (kind == K_FLOAT || kind == K_DOUBLE) && f->array == A_NONE) ||
        (f->repeated && kind == K_RAW)) {
        PyErr_Format(PyExc_TypeError, "field %U: a %s field this decoder does not handle",
                     f->proto_name, KIND_NAMES[kind]);
        return -1;
    }
    if (f->array != A_NONE)
        f->pend = m->npend++;
    if (kind == K_MESSAGE) {
        PyObject *sub = PyObject_GetAttrString(pf, "message");
        if (sub == NULL)
            return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(messages); i++)
            if (PyList_GET_ITEM(messages, i) == sub)
                f->sub = (int)i;
        Py_DECREF(sub);
        if (f->sub < 0) {
            PyErr_SetString(PyExc_TypeError, "sub-message not in schema.MESSAGES");
            return -1;
        }
    }
    if (kind == K_ENUM) {
        PyObject *vals = PyObject_GetAttrString(pf, "enum_values");
        if (vals == NULL)
            return -1;
        PyObject *seq = PySequence_Fast(vals, "enum_values is not iterable");
        Py_DECREF(vals);
        if (seq == NULL)
            return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        f->enum_vals = PyMem_Calloc((size_t)n + 1, sizeof(int64_t));
        if (f->enum_vals == NULL) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            long long x = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
            if (x == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                return -1;
            }
            f->enum_vals[i] = x;
        }
        f->n_enum = (int)n;
        Py_DECREF(seq);
    }
    return 0;
}

/* oneof groups: each field of a group gets the slot offsets of the others */
static int
setup_oneofs(Msg *m, PyObject *pfields)
{
    for (int i = 0; i < m->nfields; i++) {
        PyObject *gi = PyObject_GetAttrString(PyList_GET_ITEM(pfields, i), "oneof");
        if (gi == NULL)
            return -1;
        if (gi == Py_None) {
            Py_DECREF(gi);
            continue;
        }
        Field *f = &m->fields[i];
        f->oneof_others = PyMem_Calloc((size_t)m->nfields, sizeof(Py_ssize_t));
        if (f->oneof_others == NULL) {
            Py_DECREF(gi);
            PyErr_NoMemory();
            return -1;
        }
        for (int j = 0; j < m->nfields; j++) {
            if (j == i)
                continue;
            PyObject *gj = PyObject_GetAttrString(PyList_GET_ITEM(pfields, j), "oneof");
            if (gj == NULL) {
                Py_DECREF(gi);
                return -1;
            }
            int same = gj != Py_None ? PyObject_RichCompareBool(gi, gj, Py_EQ) : 0;
            Py_DECREF(gj);
            if (same < 0) {
                Py_DECREF(gi);
                return -1;
            }
            if (same && m->fields[j].off != f->off)
                f->oneof_others[f->n_oneof_others++] = m->fields[j].off;
        }
        Py_DECREF(gi);
    }
    return 0;
}

static int
setup_scalars(PyObject *np)
{
    const char *names[2] = {"<f4", "<f8"};
    for (int i = 0; i < 2; i++) {
        if (g_scalar_held[i])
            continue;
        Py_CLEAR(g_scalar[i]);
        PyObject *dt = PyObject_CallMethod(np, "dtype", "s", names[i]);
        if (dt == NULL)
            return -1;
        g_scalar[i] = PyObject_CallMethod(np, "zeros", "iO", 1, dt);
        Py_DECREF(dt);
        if (g_scalar[i] == NULL)
            return -1;
        if (PyObject_GetBuffer(g_scalar[i], &g_scalar_buf[i],
                               PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
            return -1;
        g_scalar_held[i] = 1;
        if (g_scalar_buf[i].len != (i ? 8 : 4)) {
            PyErr_SetString(PyExc_TypeError, "scratch scalar of a wrong size");
            return -1;
        }
    }
    return 0;
}

/* Read numpy's attributes on first need: empty, frombuffer, the scratch scalars, and every ARRAY
 * field's dtype (a spelling such as "<f4" in the schema) as a numpy dtype. */
static int
ensure_np(void)
{
    if (g_np_frombuffer != NULL)
        return 0;
    if (g_np == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_cdecode.setup() was not called");
        return -1;
    }
    PyObject *np_dtype = PyObject_GetAttrString(g_np, "dtype");
    if (np_dtype == NULL)
        return -1;
    for (int i = 0; i < g_nmsgs; i++)
        for (int j = 0; j < g_msgs[i].nfields; j++) {
            Field *f = &g_msgs[i].fields[j];
            if (f->dtype == NULL || !PyUnicode_Check(f->dtype))
                continue;
            PyObject *dt = PyObject_CallOneArg(np_dtype, f->dtype);
            if (dt == NULL) {
                Py_DECREF(np_dtype);
                return -1;
            }
            Py_SETREF(f->dtype, dt);
        }
    Py_DECREF(np_dtype);
    if (g_np_empty == NULL && (g_np_empty = PyObject_GetAttrString(g_np, "empty")) == NULL)
        return -1;
    if (setup_scalars(g_np) < 0)
        return -1;
    /* set last: its presence means all of the above is done */
    g_np_frombuffer = PyObject_GetAttrString(g_np, "frombuffer");
    return g_np_frombuffer == NULL ? -1 : 0;
}

static PyObject *
cdecode_setup(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "setup(schema, WireError, max_depth, numpy, Blob)");
        return NULL;
    }
#if PY_BIG_ENDIAN
    PyErr_SetString(PyExc_TypeError, "_cdecode reads little-endian values on little-endian "
                    "hosts only");
    return NULL;
#endif
    PyObject *schema = args[0], *np = args[3];
    if (g_active) {
        PyErr_SetString(PyExc_RuntimeError, "_cdecode.setup() while a decode is running");
        return NULL;
    }
    g_ready = 0;
    free_table();
    PyObject *messages = NULL, *mdict = NULL;

    /* the kind numbers of schema.py are the ones compiled in */
    for (int k = 0; k < K_COUNT; k++) {
        long v = attr_long(schema, KIND_NAMES[k]);
        if (v != k) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "schema.%s is not %d", KIND_NAMES[k], k);
            goto fail;
        }
    }
    if (set_blob_class(args[4]) < 0)
        goto fail;
    g_WireError = Py_NewRef(args[1]);
    g_max_depth = (int)PyLong_AsLong(args[2]);
    if (g_max_depth == -1 && PyErr_Occurred())
        goto fail;
    g_np = Py_NewRef(np);
    if ((g_float_value = PyObject_GetAttrString(schema, "FLOAT_VALUE")) == NULL ||
        (g_empty_bytes = PyBytes_FromStringAndSize(NULL, 0)) == NULL)
        goto fail;

    PyObject *gc = PyImport_ImportModule("gc");
    if (gc == NULL)
        goto fail;
    g_gc_freeze = PyObject_GetAttrString(gc, "freeze");
    g_gc_unfreeze = g_gc_freeze ? PyObject_GetAttrString(gc, "unfreeze") : NULL;
    g_gc_freeze_count = g_gc_unfreeze ? PyObject_GetAttrString(gc, "get_freeze_count") : NULL;
    Py_DECREF(gc);
    if (g_gc_freeze_count == NULL)
        goto fail;

    mdict = PyObject_GetAttrString(schema, "MESSAGES");
    if (mdict == NULL)
        goto fail;
    messages = PyDict_Check(mdict) ? PyDict_Values(mdict) : NULL;
    if (messages == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "schema.MESSAGES is not a dict");
        goto fail;
    }
    Py_ssize_t nm = PyList_GET_SIZE(messages);
    g_msgs = PyMem_Calloc((size_t)nm + 1, sizeof(Msg));
    g_names = PyDict_New();
    if (g_msgs == NULL || g_names == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    g_nmsgs = (int)nm;
    for (Py_ssize_t i = 0; i < nm; i++) {
        PyObject *pm = PyList_GET_ITEM(messages, i);
        Msg *m = &g_msgs[i];
        PyObject *cls = PyObject_GetAttrString(pm, "cls");
        if (cls == NULL)
            goto fail;
        if (!PyType_Check(cls)) {
            Py_DECREF(cls);
            PyErr_SetString(PyExc_TypeError, "Message.cls is not a class");
            goto fail;
        }
        m->cls = (PyTypeObject *)cls;
        if ((m->proto_name = PyObject_GetAttrString(pm, "proto_name")) == NULL)
            goto fail;
        PyObject *idx = PyLong_FromSsize_t(i);
        int r = idx ? PyDict_SetItem(g_names, m->proto_name, idx) : -1;
        Py_XDECREF(idx);
        if (r < 0)
            goto fail;
        int is_t = PyUnicode_Check(m->proto_name) &&
                   (PyUnicode_CompareWithASCIIString(m->proto_name, "TensorProto") == 0 ||
                    PyUnicode_CompareWithASCIIString(m->proto_name, "SparseTensorProto") == 0);
        m->is_tensor = is_t;
        if (setup_slots(m) < 0)
            goto fail;
        PyObject *uname = PyUnicode_FromString("unknown");
        if (uname == NULL)
            goto fail;
        m->unknown_off = slot_offset(m->cls, uname);
        Py_DECREF(uname);
        if (m->unknown_off < 0)
            goto fail;
    }
    for (Py_ssize_t i = 0; i < nm; i++) {
        Msg *m = &g_msgs[i];
        PyObject *pfields = PyObject_GetAttrString(PyList_GET_ITEM(messages, i), "fields");
        if (pfields == NULL)
            goto fail;
        if (!PyList_Check(pfields)) {
            Py_DECREF(pfields);
            PyErr_SetString(PyExc_TypeError, "Message.fields is not a list");
            goto fail;
        }
        Py_ssize_t nf = PyList_GET_SIZE(pfields);
        long max_tag = 0;
        for (Py_ssize_t j = 0; j < nf; j++) {
            long t = attr_long(PyList_GET_ITEM(pfields, j), "tag");
            if (t < 0 || t > MAX_TAG) {
                Py_DECREF(pfields);
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "field tag out of range");
                goto fail;
            }
            if (t > max_tag)
                max_tag = t;
        }
        m->max_tag = (int)max_tag;
        m->by_tag = PyMem_Calloc((size_t)max_tag + 1, sizeof(Field *));
        m->fields = PyMem_Calloc((size_t)nf + 1, sizeof(Field));
        if (m->by_tag == NULL || m->fields == NULL) {
            Py_DECREF(pfields);
            PyErr_NoMemory();
            goto fail;
        }
        m->nfields = (int)nf;
        for (Py_ssize_t j = 0; j < nf; j++) {
            if (setup_field(m, &m->fields[j], PyList_GET_ITEM(pfields, j), messages) < 0) {
                Py_DECREF(pfields);
                goto fail;
            }
        }
        if (setup_oneofs(m, pfields) < 0) {
            Py_DECREF(pfields);
            goto fail;
        }
        Py_DECREF(pfields);
    }
    Py_DECREF(messages);
    Py_DECREF(mdict);
    g_ready = 1;
    Py_RETURN_NONE;
fail:
    Py_XDECREF(messages);
    Py_XDECREF(mdict);
    free_table();
    return NULL;
}

/* ---- the splice of value_info entries (splice.py) ------------------------------------------ */

/* insertion_point(data, start, end, before) -> position: splice.insertion_point. ``before`` the
 * GraphProto tags the writer emits no later than value_info, as a bit mask (tags 1 to 63). Raises
 * WireError for octets that are not fields (the caller then runs the Python walk for its
 * message). */
static PyObject *
cdecode_insertion_point(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    Py_ssize_t start, end;
    uint64_t before;
    if (nargs != 4 || (start = PyLong_AsSsize_t(args[1])) == -1 ||
        (end = PyLong_AsSsize_t(args[2])) == -1 ||
        ((before = PyLong_AsUnsignedLongLong(args[3])) == (uint64_t)-1 && PyErr_Occurred())) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "insertion_point(data, start, end, before)");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *b = (const uint8_t *)view.buf;
    PyObject *result = NULL;
    if (start < 0 || end > view.len || start > end) {
        PyErr_SetString(PyExc_ValueError, "insertion_point: range outside the data");
        goto done;
    }
    Py_ssize_t pos = start, at = start;
    while (pos < end) {
        uint64_t key;
        if (rd_varint(b, &pos, end, 0, &key) < 0 || skip_field(b, &pos, end, key & 7, 0) < 0)
            goto done;
        uint64_t tag = key >> 3;
        if (tag < 64 && (before >> tag & 1))
            at = pos;
    }
    result = PyLong_FromSsize_t(at);
done:
    PyBuffer_Release(&view);
    return result;
}

static int
buf_varint(Buf *b, uint64_t v)
{
    uint8_t tmp[10];
    int n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    return buf_add(b, tmp, n);
}

/* The fields of a ValueInfo record value_info_octets reads, by index: read from their slots
 * when the entry is of the class whose offsets were looked up (vi_cls), else as attributes. */
enum { VI_NAME, VI_TYPE, VI_DOC, VI_META, VI_UNKNOWN, VI_N };
static PyObject *vi_names[VI_N];
static PyTypeObject *vi_cls = NULL;
static Py_ssize_t vi_off[VI_N];

static int
vi_setup(PyTypeObject *cls)
{
    static const char *const names[VI_N] = {"name", "type", "doc_string", "metadata_props",
                                            "unknown"};
    if (vi_names[0] == NULL)
        for (int k = 0; k < VI_N; k++)
            if ((vi_names[k] = PyUnicode_InternFromString(names[k])) == NULL)
                return -1;
    if (cls == vi_cls)
        return 0;
    Py_ssize_t off[VI_N];
    for (int k = 0; k < VI_N; k++)
        if ((off[k] = slot_offset(cls, vi_names[k])) < 0) {
            PyErr_Clear();  /* not slots: read as attributes */
            return 0;
        }
    Py_XSETREF(vi_cls, (PyTypeObject *)Py_NewRef((PyObject *)cls));
    memcpy(vi_off, off, sizeof off);
    return 0;
}

static PyObject *
vi_attr(PyObject *vi, int k)
{
    if (Py_IS_TYPE(vi, vi_cls)) {
        PyObject *v = SLOT(vi, vi_off[k]);
        if (v != NULL)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(vi, vi_names[k]);
}

/* Whether field ``k`` of ``vi`` is set as splice.py tests it: not None (``none_only``), else
 * true (a non-empty list or bytes). 1, 0, -1 on error. */
static int
is_set(PyObject *vi, int k, int none_only)
{
    PyObject *v = vi_attr(vi, k);
    if (v == NULL)
        return -1;
    int r = v == Py_None ? 0 : none_only ? 1 : PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static int
varint_len(uint64_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* value_info_octets(entries, type_field, entry_field) -> bytes: splice.value_info_octets. For an
 * entry with no doc_string, metadata_props or unknown fields: key 13, its length, its name field
 * (UTF-8, surrogateescape), then ``type_field(entry.type)`` (the type field's octets, asked once
 * per distinct Type object); for any other entry ``entry_field(entry)`` (its whole field). */
static PyObject *
cdecode_value_info_octets(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "value_info_octets(entries: list, type_field, entry_field)");
        return NULL;
    }
    PyObject *entries = args[0], *type_field = args[1], *entry_field = args[2];
    if (vi_setup(PyList_GET_SIZE(entries) ? Py_TYPE(PyList_GET_ITEM(entries, 0))
                                          : &PyBaseObject_Type) < 0)
        return NULL;
    PyObject *typed = PyDict_New(), *result = NULL;
    Buf out = {NULL, 0, 0};
    if (typed == NULL)
        return NULL;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(entries); k++) {
        PyObject *vi = PyList_GET_ITEM(entries, k), *piece = NULL;
        Py_INCREF(vi);
        int plain = 1, r;
        if ((r = is_set(vi, VI_DOC, 1)) != 0 || (r = is_set(vi, VI_META, 0)) != 0 ||
            (r = is_set(vi, VI_UNKNOWN, 0)) != 0) {
            if (r < 0)
                goto entry_fail;
            plain = 0;
        }
        if (!plain) {
            if ((piece = PyObject_CallOneArg(entry_field, vi)) == NULL)
                goto entry_fail;
            if (!PyBytes_Check(piece)) {
                PyErr_SetString(PyExc_TypeError, "entry_field must give bytes");
                goto entry_fail;
            }
            if (buf_add(&out, PyBytes_AS_STRING(piece), PyBytes_GET_SIZE(piece)) < 0)
                goto entry_fail;
            Py_CLEAR(piece);
            Py_DECREF(vi);
            continue;
        }
        PyObject *t = vi_attr(vi, VI_TYPE), *name = NULL, *enc = NULL;
        if (t == NULL)
            goto entry_fail;
        PyObject *id = PyLong_FromVoidPtr(t);
        if (id == NULL) {
            Py_DECREF(t);
            goto entry_fail;
        }
        PyObject *tf = PyDict_GetItemWithError(typed, id);  /* borrowed */
        if (tf == NULL && !PyErr_Occurred()) {
            PyObject *made = PyObject_CallOneArg(type_field, t);
            if (made != NULL && !PyBytes_Check(made)) {
                Py_CLEAR(made);
                PyErr_SetString(PyExc_TypeError, "type_field must give bytes");
            }
            /* the Type is kept alive by the entry (and the dict holds the octets): its id is
             * not reused while ``entries`` lives */
            if (made != NULL && PyDict_SetItem(typed, id, made) == 0)
                tf = made;
            Py_XDECREF(made);  /* the dict holds it */
        }
        Py_DECREF(id);
        Py_DECREF(t);
        if (tf == NULL)
            goto entry_fail;
        if ((name = vi_attr(vi, VI_NAME)) == NULL)
            goto entry_fail;
        if (!PyUnicode_Check(name)) {
            Py_DECREF(name);
            PyErr_SetString(PyExc_TypeError, "a value_info name must be a str");
            goto entry_fail;
        }
        Py_ssize_t n;
        const char *u = PyUnicode_AsUTF8AndSize(name, &n);
        if (u == NULL) {  /* lone surrogates: encoded as the writer encodes them */
            PyErr_Clear();
            if ((enc = PyUnicode_AsEncodedString(name, "utf-8", "surrogateescape")) == NULL) {
                Py_DECREF(name);
                goto entry_fail;
            }
            u = PyBytes_AS_STRING(enc);
            n = PyBytes_GET_SIZE(enc);
        }
        Py_ssize_t name_len = 1 + varint_len((uint64_t)n) + n;
        Py_ssize_t size = name_len + PyBytes_GET_SIZE(tf);
        int bad = buf_reserve(&out, 1 + 10 + size) < 0 || buf_add(&out, "\x6a", 1) < 0 ||
                  buf_varint(&out, (uint64_t)size) < 0 || buf_add(&out, "\x0a", 1) < 0 ||
                  buf_varint(&out, (uint64_t)n) < 0 || buf_add(&out, u, n) < 0 ||
                  buf_add(&out, PyBytes_AS_STRING(tf), PyBytes_GET_SIZE(tf)) < 0;
        Py_XDECREF(enc);
        Py_DECREF(name);
        if (bad)
            goto entry_fail;
        Py_DECREF(vi);
        continue;
    entry_fail:
        Py_XDECREF(piece);
        Py_DECREF(vi);
        goto done;
    }
    result = PyBytes_FromStringAndSize(out.p ? out.p : "", out.len);
done:
    PyMem_Free(out.p);
    Py_DECREF(typed);
    return result;
}

static PyMethodDef methods[] = {
    {"setup", (PyCFunction)(void (*)(void))cdecode_setup, METH_FASTCALL,
     "setup(schema, WireError, max_depth, numpy, Blob): build the message table from schema.MESSAGES."},
    {"decode", (PyCFunction)(void (*)(void))cdecode_decode, METH_FASTCALL,
     "decode(data, message, raw, blob_source, tensors) -> record: decode._decode in C."},
    {"first_unchecked", (PyCFunction)(void (*)(void))cdecode_first_unchecked, METH_FASTCALL,
     "first_unchecked(tensors, start, bits) -> index of the first tensor needing the full check."},
    {"insertion_point", (PyCFunction)(void (*)(void))cdecode_insertion_point, METH_FASTCALL,
     "insertion_point(data, start, end, before) -> where splice.py inserts value_info."},
    {"value_info_octets", (PyCFunction)(void (*)(void))cdecode_value_info_octets, METH_FASTCALL,
     "value_info_octets(entries, type_field, entry_field) -> the value_info fields' octets."},
    {NULL, NULL, 0, NULL}};

static void
cdecode_free(void *mod)
{
    g_ready = 0;
    free_table();
}

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cdecode",
    "The ONNX wire decoder of decode.py in C (Clause 12); see decode.py for its use.", -1,
    methods, NULL, NULL, NULL, cdecode_free};

PyMODINIT_FUNC
PyInit__cdecode(void)
{
    return PyModule_Create(&module);
}
