/*
 * _ckernels: compiled float32 kernels of onemodel's evaluator (onemodel.evaluate.kernels).
 *
 * An optional accelerator, like the wire decoder's _cdecode: without a C compiler the install
 * still succeeds and the kernels compute the same operators with numpy (the semantics are the
 * operators' of ONNX Part 1, Clause 11; float results agree within float32 rounding, not bit
 * for bit, since the sums are taken in another order).
 *
 * Interface (called by onemodel/evaluate/ckernels.py only, which checks every argument first;
 * the checks here repeat the buffer lengths and shapes so that no call can read or write out of
 * bounds; a strided buffer's extent is its exporter's, numpy's):
 *
 *   conv2d(x, w, b, y, dims, act)
 *       2-D convolution of one group (Conv, Clause 11 operator semantics): x [N, C, H, W],
 *       w [M, C, KH, KW], b [M] or None, y [N, M, OH, OW], all float32 C-contiguous buffers
 *       (y writable); dims = (N, C, H, W, M, KH, KW, pad_top, pad_left, OH, OW, stride_h,
 *       stride_w, dilation_h, dilation_w), pads >= 0. y[n, m, oy, ox] = b[m] + sum over
 *       (c, ky, kx) in row-major order of w[m, c, ky, kx] * xpad[n, c, oy*sh + ky*dh,
 *       ox*sw + kx*dw] (xpad: x with pad_top rows and pad_left columns of zeros before it and
 *       zeros after it), then the activation act: 0 none, 1 relu (max(., 0), NaN stays NaN; True
 *       is 1), 2 SiLU (y * sigmoid(y) with sigmoid8, the bits of the Sigmoid kernel and the
 *       product Mul rounds: the same values as Conv -> Sigmoid -> Mul).
 *
 *   exp_rows(a, out, sums, rows, n)
 *       Softmax's exponentials: for each of ``rows`` rows of ``n`` float32 values of a,
 *       out = exp(a - max(row)) and sums[row] = the sum of that row of out (float32), as
 *       numpy's exp(a - max(a)): a row holding NaN gives NaN, one whose maximum is -inf NaN,
 *       one whose maximum is +inf NaN there and 0 elsewhere. exp is within 1.02 ulp (range
 *       reduction by ln 2 in two parts, degree-6 polynomial, results down to the subnormal
 *       range rounded once; 1.0103 at worst with fused multiply-adds, 0.982 without, over
 *       every float32 of [-110, 0]).
 *
 *   layer_norm(x, scale, bias, y, mean, inv, rows, n, epsilon[, residual])
 *       LayerNormalization over rows of n float32 values (Clause 11 operator semantics,
 *       stash type float32): per row, mean = sum(x) / n and var = sum((x - mean)^2) / n (in
 *       double, each rounded to float32 once; a row whose float32 sum would overflow stays
 *       finite, where numpy's float32 path gives NaN), inv = 1 / sqrt(var + epsilon),
 *       y = (x - mean) * inv * scale (+ bias); scale and bias (or None) hold n values; mean and
 *       inv receive a value a row. With ``residual`` (None, or a float32 buffer of any
 *       strides whose last axis holds n packed values and whose leading axes hold the rows, in
 *       row-major order) the rows normalized are x + residual (each sum rounded to float32, as
 *       Add gives it), y holding them first: LayerNormalization(Add(x, residual)).
 *
 *   attention(q, k, v, out, scale_q, scale_k)
 *       The attention chain MatMul -> Softmax -> MatMul per head: q [..., m, d],
 *       k [..., d, n] (the second operand of the first MatMul), v [..., n, dv] float32 of one
 *       batch shape (3 axes or more; the leading axes are the heads), any strides;
 *       out [..., m, dv] writable, any strides but its rows packed; dv <= 128; scale_q / scale_k None or a float
 *       that each element of q / k is multiplied by first (rounded to float32 as Mul rounds
 *       it). For each query row: the n scores (sums over d in order), exp(score - row max) as
 *       exp_rows computes it, the row sum, the probabilities p_j = e_j / sum (as Softmax
 *       rounds them) and out = sum_j p_j v_j (a sum over j in order). Eight heads at a time are
 *       copied packed into scratch buffers (read along the smaller stride innermost, the heads
 *       in between: for a Transpose's views of [seq, batch, heads, d] that reads runs of eight
 *       rows), k transposed to [d, n] and v's rows padded to whole vectors. Six query rows are
 *       computed at a time, as tiles of 6 rows by 16 columns held in registers (the shape of
 *       conv2d's blocks below): their scores, the rows' maxima (and minima) taken from the
 *       registers, then their products with v; no score tensor is stored. A row whose shifted
 *       scores all lie in [-87, 0] takes its exponentials without exp8's handling of results
 *       in the subnormal range (exp8_normal: the same bits, checked over every float32 there).
 *
 *   dwconv2d(x, w, b, y, dims, act)
 *       The depthwise convolution (group = C = M, weights [C, 1, KH, KW]), dims as conv2d's:
 *       per sample and channel, the plane is copied into a zero-padded buffer laid out as
 *       conv2d's (one channel), and blocks of 6 output rows by 8 columns are 6 vector
 *       accumulators, each tap one broadcast weight and 6 loads. Sums over (kernel row, kernel
 *       column), then the bias, then the activation act as conv2d's.
 *
 *   sigmoid(x, y, n)
 *       y = 1 / (1 + exp(-x)) of n float32 values, from exp(-|x|) (exp8: within 1 ulp, see
 *       exp_rows): 1 / (1 + e) for x >= 0, e / (1 + e) below, never overflowing; NaN stays
 *       NaN. x and y may be one buffer.
 *
 *   bias_relu(x, bias, y, rows, n, relu)
 *       y = x + bias over rows of n float32 values (bias: n values, or None), then
 *       max(y, 0) when relu is true (NaN stays NaN, -0 becomes +0, as numpy.maximum gives
 *       them); x and y may be one buffer (in place). The Add of a MatMul's bias and Relu in one
 *       pass (numpy's maximum with a scalar 0 has no SIMD loop on CPUs without AVX-512).
 *
 * How conv2d computes: per sample, the input is copied once into a zero-padded buffer
 * [stride_w, C, Hp, Wp] whose columns are split by stride_w phases (padded column j at phase
 * j % stride_w, index j / stride_w), so that the inputs of 16 consecutive output columns at one
 * kernel tap are 16 consecutive floats of one phase; each phase row is wide enough for the
 * last block of 16. The weights are packed [ceil(M / 6), C * KH * KW, 6] (output channels
 * zero-filled to a multiple of 6). Each block of 6 output channels by 16 output columns of one
 * row is 12 vector accumulators of 8 floats (registers), updated per tap (c, ky, kx) with two
 * loads of 8 inputs and 6 broadcast weights: 12 fused multiply-adds per 8 loads, the shape of
 * an optimized matrix-product kernel, without im2col columns; each row of 16 results is stored
 * as two vectors (8 where fewer than 9 columns are left); an output at most 4 columns wide takes
 * two output rows a vector, one of 5 to 8 columns two rows a block (the tiles full, the same
 * sums). Functions are compiled for x86-64-v4 (AVX-512), -v3 (AVX2 and FMA) and the
 * baseline where GCC supports target_clones; the loader picks one at import.
 *
 * The GIL is released while computing; the Py_buffers are held and released on every path.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#if __GNUC__ >= 12
#define MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MULTIVERSION __attribute__((target_clones("arch=haswell", "default")))
#endif
#else
#define MULTIVERSION
#endif

#if defined(__GNUC__) || defined(__clang__)
typedef float v8 __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
#define INLINE static inline __attribute__((always_inline))
#pragma GCC diagnostic ignored "-Wpsabi" /* 32-byte vectors pass only between inlined functions */
#else
#error "_ckernels needs GCC or clang vector extensions"
#endif

/* f in every lane (a broadcast instruction; an initializer list of f compiles to inserts) */
#if defined(__has_builtin)
#if __has_builtin(__builtin_shufflevector)
#define HAVE_SHUFFLEVECTOR 1
#endif
#endif
INLINE v8 bc(float f) {
    v8 v = {f};
#ifdef HAVE_SHUFFLEVECTOR /* clang, GCC 12 and later */
    return __builtin_shufflevector(v, v, 0, 0, 0, 0, 0, 0, 0, 0);
#else
    v8i zero = {0, 0, 0, 0, 0, 0, 0, 0};
    return __builtin_shuffle(v, zero); /* GCC before 12: the same value, built more slowly */
#endif
}

INLINE v8 load8(const float *p) {
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}

INLINE void store8(float *p, v8 v) { memcpy(p, &v, sizeof v); }

/* where mask (all ones / all zeros per lane) is set, a, else b */
INLINE v8 select8(v8i mask, v8 a, v8 b) { return (v8)((mask & (v8i)a) | (~mask & (v8i)b)); }

/* ---- exponentials (exp_rows, sigmoid, the Conv's SiLU) ----------------------------------- */

/* exp of 8 floats x <= 0 or NaN (values shifted by their maximum): x = n ln2 + r,
 * |r| <= ln2 / 2, exp(r) by a degree-6 polynomial, times 2^(n + 64) (exact) and 2^-64 (so
 * that results in the subnormal range are rounded once); x < -104 is clamped there, where the
 * result rounds to 0. A NaN lane stays NaN through the polynomial (its n, converted to an
 * integer, is whatever the conversion instruction gives; the product with NaN is NaN). */
INLINE v8 exp8(v8 x) {
    v8 xc = select8((v8i)(x < bc(-104.0f)), bc(-104.0f), x);
    const v8 magic = bc(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
    v8 n = (xc * bc(1.44269504088896341f) + magic) - magic;
    v8 r = xc - n * bc(0.693359375f);
    r = r - n * bc(-2.12194440e-4f);
    v8 p = bc(1.9875691500e-4f);
    p = p * r + bc(1.3981999507e-3f);
    p = p * r + bc(8.3334519073e-3f);
    p = p * r + bc(4.1665795894e-2f);
    p = p * r + bc(1.6666665459e-1f);
    p = p * r + bc(5.0000001201e-1f);
    p = p * (r * r) + r + bc(1.0f);
    /* n is in [-150, 0]: p * 2^(n + 64) is exact (a normal power of two), the product with
     * 2^-64 rounds once, into the subnormal range where the result is there */
    v8i ni = __builtin_convertvector(n, v8i);
    v8 s = (v8)((ni + (127 + 64)) << 23);
    return (p * s) * bc(0x1p-64f);
}

/* 1 / (1 + exp(-x)) of 8 floats from e = exp(-|x|) (never overflows): 1 / (1 + e) for x >= 0,
 * e / (1 + e) below; NaN stays NaN (its e is NaN), -inf gives 0 and +inf 1 */
INLINE v8 sigmoid8(v8 v) {
    const v8 one = bc(1.0f), zero = bc(0.0f);
    v8 e = exp8(select8((v8i)(v < zero), v, -v));
    v8 d = one + e;
    return select8((v8i)(v >= zero), one / d, e / d);
}

/* the activation applied to a Conv's outputs as they are stored */
#define ACT_RELU 1
#define ACT_SILU 2 /* x * sigmoid(x), as Mul(x, Sigmoid(x)) rounds it */

INLINE v8 activate(v8 o, int act) {
    if (act == ACT_RELU) return select8((v8i)(o < bc(0.0f)), bc(0.0f), o);
    if (act == ACT_SILU) return o * sigmoid8(o);
    return o;
}

/* ---- conv2d ----------------------------------------------------------------------------- */

#define MB 6 /* output channels a block */

/* One block of up to MB output channels (from m0) by NV * 8 output columns (from ox0) of output
 * row oy: the sums over the R (c, ky, kx) taps, plus the bias, then relu; ``cols`` of the
 * columns stored. */
#define CONV_BLOCK(NV)                                                                          \
    do {                                                                                        \
        v8 acc[NV][MB];                                                                         \
        for (int v = 0; v < NV; v++)                                                            \
            for (int i = 0; i < MB; i++) acc[v][i] = bc(0.0f);                                  \
        const float *base = P + oy * sh * Wp + ox0;                                             \
        const float *w = wb;                                                                    \
        for (Py_ssize_t r = 0; r < R; r++, w += MB) {                                           \
            const float *src = base + off[r];                                                   \
            v8 x[NV];                                                                           \
            for (int v = 0; v < NV; v++) x[v] = load8(src + 8 * v);                             \
            for (int i = 0; i < MB; i++) {                                                      \
                v8 wi = bc(w[i]);                                                               \
                for (int v = 0; v < NV; v++) acc[v][i] += wi * x[v];                            \
            }                                                                                   \
        }                                                                                       \
        for (Py_ssize_t i = 0; i < mn; i++) {                                                   \
            float *dst = y + ((m0 + i) * OH + oy) * OW + ox0;                                   \
            float t[8 * NV];                                                                    \
            for (int v = 0; v < NV; v++) {                                                      \
                v8 o = acc[v][i] + bias[i];                                                     \
                o = activate(o, relu);                       \
                store8(t + 8 * v, o);                                                           \
            }                                                                                   \
            memcpy(dst, t, (size_t)cols * sizeof(float));                                       \
        }                                                                                       \
    } while (0)

typedef float v4 __attribute__((vector_size(16)));

/* 4 floats at p and 4 at q as one vector of 8 */
INLINE v8 load4x2(const float *p, const float *q) {
    v4 a, b;
    memcpy(&a, p, sizeof a);
    memcpy(&b, q, sizeof b);
#ifdef HAVE_SHUFFLEVECTOR
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7);
#else
    union {
        v8 v;
        v4 h[2];
    } u;
    u.h[0] = a;
    u.h[1] = b;
    return u.v;
#endif
}

/* An output at most 4 columns wide: two output rows (oy, oy + 1) a vector of 8, so that the
 * tiles are full; the same sums in the same order as CONV_BLOCK. Row OH (an odd OH's pair)
 * reads the buffer's slack rows and is not stored. */
#define CONV_PAIR()                                                                             \
    do {                                                                                        \
        v8 acc[MB];                                                                             \
        for (int i = 0; i < MB; i++) acc[i] = bc(0.0f);                                         \
        const float *base = P + oy * sh * Wp;                                                   \
        const float *w = wb;                                                                    \
        for (Py_ssize_t r = 0; r < R; r++, w += MB) {                                           \
            v8 x = load4x2(base + off[r], base + sh * Wp + off[r]);                             \
            for (int i = 0; i < MB; i++) acc[i] += bc(w[i]) * x;                                \
        }                                                                                       \
        for (Py_ssize_t i = 0; i < mn; i++) {                                                   \
            float t[8];                                                                         \
            v8 o = acc[i] + bias[i];                                                            \
            o = activate(o, relu);                           \
            store8(t, o);                                                                       \
            float *dst = y + ((m0 + i) * OH + oy) * OW;                                         \
            memcpy(dst, t, (size_t)OW * sizeof(float));                                         \
            if (oy + 1 < OH) memcpy(dst + OW, t + 4, (size_t)OW * sizeof(float));               \
        }                                                                                       \
    } while (0)

/* An output 5 to 8 columns wide: rows oy and oy + 1 in the two vectors of a block (12
 * accumulators, two loads and 6 broadcasts per tap, as CONV_BLOCK(2) has for 16 columns); the
 * same sums in the same order. Row OH (an odd OH's pair) reads the slack rows, not stored. */
#define CONV_ROWS2()                                                                            \
    do {                                                                                        \
        v8 acc[2][MB];                                                                          \
        for (int v = 0; v < 2; v++)                                                             \
            for (int i = 0; i < MB; i++) acc[v][i] = bc(0.0f);                                  \
        const float *base = P + oy * sh * Wp;                                                   \
        const float *w = wb;                                                                    \
        for (Py_ssize_t r = 0; r < R; r++, w += MB) {                                           \
            const float *src = base + off[r];                                                   \
            v8 x0 = load8(src), x1 = load8(src + sh * Wp);                                      \
            for (int i = 0; i < MB; i++) {                                                      \
                v8 wi = bc(w[i]);                                                               \
                acc[0][i] += wi * x0;                                                           \
                acc[1][i] += wi * x1;                                                           \
            }                                                                                   \
        }                                                                                       \
        for (Py_ssize_t i = 0; i < mn; i++) {                                                   \
            float *dst = y + ((m0 + i) * OH + oy) * OW;                                         \
            for (int v = 0; v < 2 && oy + v < OH; v++) {                                        \
                float t[8];                                                                     \
                store8(t, activate(acc[v][i] + bias[i], relu));                                 \
                memcpy(dst + v * OW, t, (size_t)OW * sizeof(float));                             \
            }                                                                                   \
        }                                                                                       \
    } while (0)

MULTIVERSION
static void conv_sample(const float *P, Py_ssize_t Wp, const float *wp, const Py_ssize_t *off,
                        Py_ssize_t R, Py_ssize_t M, Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t sh,
                        const float *b, int relu, float *y) {
    for (Py_ssize_t m0 = 0; m0 < M; m0 += MB) {
        const float *wb = wp + (m0 / MB) * R * MB;
        Py_ssize_t mn = M - m0 < MB ? M - m0 : MB;
        v8 bias[MB];
        for (Py_ssize_t i = 0; i < MB; i++) bias[i] = bc(b && i < mn ? b[m0 + i] : 0.0f);
        if (OW <= 4 && OH > 1) {
            for (Py_ssize_t oy = 0; oy < OH; oy += 2) CONV_PAIR();
            continue;
        }
        if (OW <= 8 && OH > 1) {
            for (Py_ssize_t oy = 0; oy < OH; oy += 2) CONV_ROWS2();
            continue;
        }
        for (Py_ssize_t oy = 0; oy < OH; oy++) {
            for (Py_ssize_t ox0 = 0; ox0 < OW;) {
                Py_ssize_t left = OW - ox0;
                if (left > 8) {
                    Py_ssize_t cols = left < 16 ? left : 16;
                    CONV_BLOCK(2);
                    ox0 += 16;
                } else {
                    Py_ssize_t cols = left;
                    CONV_BLOCK(1);
                    ox0 += 8;
                }
            }
        }
    }
}

/* ---- depthwise conv2d ------------------------------------------------------------------- */

#define DR 6 /* output rows a depthwise block: 6 accumulators of 8 columns */

/* One channel of a depthwise convolution: P its padded plane (phases as conv2d's, rows of Wp,
 * with DR * sh rows of slack after the last phase), w its R = KH * KW taps, off[r] the offset of
 * tap r. Blocks of DR output rows by 8 output columns, each tap one broadcast weight and DR
 * loads; rows past OH are computed from the slack and not stored. */
MULTIVERSION
static void dw_channel(const float *P, Py_ssize_t Wp, const float *w, const Py_ssize_t *off,
                       Py_ssize_t R, Py_ssize_t OH, Py_ssize_t OW, Py_ssize_t sh, float bias,
                       int relu, float *y) {
    const Py_ssize_t step = sh * Wp;
    for (Py_ssize_t oy0 = 0; oy0 < OH; oy0 += DR) {
        Py_ssize_t rn = OH - oy0 < DR ? OH - oy0 : DR;
        for (Py_ssize_t ox0 = 0; ox0 < OW; ox0 += 8) {
            v8 acc[DR];
            for (int i = 0; i < DR; i++) acc[i] = bc(0.0f);
            const float *base = P + oy0 * step + ox0;
            for (Py_ssize_t r = 0; r < R; r++) {
                v8 wr = bc(w[r]);
                const float *src = base + off[r];
                for (int i = 0; i < DR; i++) acc[i] += wr * load8(src + i * step);
            }
            Py_ssize_t cols = OW - ox0 < 8 ? OW - ox0 : 8;
            for (Py_ssize_t i = 0; i < rn; i++) {
                float t[8];
                v8 o = acc[i] + bc(bias);
                o = activate(o, relu);
                store8(t, o);
                memcpy(y + (oy0 + i) * OW + ox0, t, (size_t)cols * sizeof(float));
            }
        }
    }
}

/* a native float32 format: "f", or with a native byte-order prefix */
static int native_float(const char *f) {
    if (!f) return 0;
    if (f[0] == '@' || f[0] == '=') f++;
#if PY_LITTLE_ENDIAN
    else if (f[0] == '<') f++;
#else
    else if (f[0] == '>' || f[0] == '!') f++;
#endif
    return strcmp(f, "f") == 0;
}

/* a * b for a, b >= 0 when the product is at most lim; -1 when it is not or a factor is < 0 */
static Py_ssize_t mul_lim(Py_ssize_t a, Py_ssize_t b, Py_ssize_t lim) {
    if (a < 0 || b < 0) return -1;
    if (a == 0 || b == 0) return 0;
    return a > lim / b ? -1 : a * b;
}

/* rows >= 0 and n >= 1 from two Python ints, rows * n at most 2^40; -1 with a Python error set
 * (ValueError naming ``what``) otherwise */
static int get_rows(PyObject *orows, PyObject *on, Py_ssize_t *rows, Py_ssize_t *n,
                    const char *what) {
    *rows = PyLong_AsSsize_t(orows);
    if (*rows == -1 && PyErr_Occurred()) return -1;
    *n = PyLong_AsSsize_t(on);
    if (*n == -1 && PyErr_Occurred()) return -1;
    const Py_ssize_t LIM = (Py_ssize_t)1 << 40;
    if (*rows < 0 || *n < 1 || *rows > LIM || *n > LIM / (*rows ? *rows : 1)) {
        PyErr_Format(PyExc_ValueError, "%s: rows >= 0, n >= 1 expected", what);
        return -1;
    }
    return 0;
}

static int get_buffer(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t count,
                      const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) return -1;
    if (view->itemsize != 4 || !native_float(view->format) || view->len != count * 4) {
        PyErr_Format(PyExc_ValueError, "%s: a C-contiguous float32 buffer of %zd elements "
                     "expected", what, count);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* a float32 buffer of ndim axes (any number when ndim < 0) with any strides (multiples of 4
 * bytes) */
static int get_strided(PyObject *obj, Py_buffer *view, int ndim, int writable,
                       const char *what) {
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_RECORDS : PyBUF_RECORDS_RO) < 0) return -1;
    if (ndim < 0) ndim = view->ndim;
    int ok = view->itemsize == 4 && native_float(view->format) && view->ndim == ndim &&
             ((uintptr_t)view->buf % 4) == 0;
    /* (the stride of an axis of size 1 is never used: numpy's exporter may give any value) */
    for (int i = 0; ok && i < ndim; i++) ok = view->shape[i] == 1 || view->strides[i] % 4 == 0;
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "%s: a %d-D float32 buffer (aligned strides) expected",
                     what, ndim);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* the offset (in floats) of index i of the first ``lead`` axes of a strided buffer, in row-major
 * order (the heads of attention's operands, the rows of a residual) */
static Py_ssize_t lead_offset(const Py_buffer *b, int lead, Py_ssize_t i) {
    Py_ssize_t off = 0;
    for (int a = lead - 1; a >= 0; a--) {
        off += (i % b->shape[a]) * (b->strides[a] / 4);
        i /= b->shape[a];
    }
    return off;
}

static PyObject *ck_conv2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "conv2d(x, w, b, y, dims, relu)");
        return NULL;
    }
    Py_ssize_t d[15];
    PyObject *dims = args[4];
    if (!PyTuple_Check(dims) || PyTuple_GET_SIZE(dims) != 15) {
        PyErr_SetString(PyExc_TypeError, "conv2d: dims is a tuple of 15 ints");
        return NULL;
    }
    for (int i = 0; i < 15; i++) {
        d[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(dims, i));
        if (d[i] == -1 && PyErr_Occurred()) return NULL;
    }
    Py_ssize_t N = d[0], C = d[1], H = d[2], W = d[3], M = d[4], KH = d[5], KW = d[6];
    Py_ssize_t pt = d[7], pl = d[8], OH = d[9], OW = d[10], sh = d[11], sw = d[12];
    Py_ssize_t dh = d[13], dw = d[14];
    long act = PyLong_AsLong(args[5]); /* 0, ACT_RELU (True) or ACT_SILU */
    if (act == -1 && PyErr_Occurred()) return NULL;
    if (act < 0 || act > ACT_SILU) {
        PyErr_Format(PyExc_ValueError, "conv: activation %ld is not 0, 1 (relu) or 2 (silu)", act);
        return NULL;
    }
    int relu = (int)act;
    const Py_ssize_t LIM = (Py_ssize_t)1 << 40;
    for (int i = 0; i < 15; i++) {
        Py_ssize_t lo = (i >= 11) ? 1 : (i == 7 || i == 8) ? 0 : 1;
        if (d[i] < lo || d[i] > LIM) {
            PyErr_Format(PyExc_ValueError, "conv2d: dimension %d is %zd", i, d[i]);
            return NULL;
        }
    }
    /* the padded buffer: rows for every output row's taps; its columns split into sw phases
     * (padded column j at [j % sw][j / sw]), each wide enough for whole blocks of 16. Every
     * size is a checked product (each factor is at most LIM, a product of two could wrap). */
    Py_ssize_t t1 = mul_lim(OH - 1, sh, LIM), t2 = mul_lim(KH - 1, dh, LIM);
    Py_ssize_t t3 = mul_lim(OW - 1, sw, LIM), t4 = mul_lim(KW - 1, dw, LIM);
    if (t1 < 0 || t2 < 0 || t3 < 0 || t4 < 0) goto too_large;
    Py_ssize_t Hp = t1 + t2 + 1;
    Py_ssize_t Wlog = t3 + t4 + 1;             /* the padded columns read */
    Py_ssize_t Wp = (Wlog + sw - 1) / sw + 16; /* a phase's row */
    Py_ssize_t R = mul_lim(mul_lim(C, KH, LIM), KW, LIM), Mb = (M + MB - 1) / MB;
    Py_ssize_t nx = mul_lim(mul_lim(mul_lim(N, C, LIM), H, LIM), W, LIM);
    Py_ssize_t nw = mul_lim(M, R, LIM), npk = mul_lim(mul_lim(Mb, R, LIM), MB, LIM);
    Py_ssize_t ny = mul_lim(mul_lim(mul_lim(N, M, LIM), OH, LIM), OW, LIM);
    /* (sh + 1 rows of slack: the second row of CONV_PAIR's last pair) */
    Py_ssize_t planes = mul_lim(mul_lim(sw, C, LIM), Hp, LIM);
    Py_ssize_t np_ = planes < 0 ? -1 : mul_lim(planes + sh + 1, Wp, LIM);
    if (R < 0 || nx < 0 || nw < 0 || npk < 0 || ny < 0 || np_ < 0) goto too_large;
    Py_buffer bx, bw, bb, by;
    if (get_buffer(args[0], &bx, 0, nx, "x") < 0) return NULL;
    if (get_buffer(args[1], &bw, 0, nw, "w") < 0) {
        PyBuffer_Release(&bx);
        return NULL;
    }
    int has_b = args[2] != Py_None;
    if (has_b && get_buffer(args[2], &bb, 0, M, "b") < 0) {
        PyBuffer_Release(&bx);
        PyBuffer_Release(&bw);
        return NULL;
    }
    if (get_buffer(args[3], &by, 1, ny, "y") < 0) {
        PyBuffer_Release(&bx);
        PyBuffer_Release(&bw);
        if (has_b) PyBuffer_Release(&bb);
        return NULL;
    }
    float *wp = calloc((size_t)npk, sizeof(float));
    float *P = calloc((size_t)np_, sizeof(float));
    Py_ssize_t *off = malloc((size_t)R * sizeof(Py_ssize_t));
    PyObject *result = NULL;
    if (!wp || !P || !off) {
        PyErr_NoMemory();
        goto done;
    }
    const float *x = bx.buf, *w = bw.buf, *b = has_b ? (const float *)bb.buf : NULL;
    float *y = by.buf;
    Py_BEGIN_ALLOW_THREADS
    /* weights [M, C, KH, KW] -> [Mb, R, MB]; tap r = (c, ky, kx) reads P at off[r] */
    for (Py_ssize_t m = 0; m < M; m++)
        for (Py_ssize_t r = 0; r < R; r++) wp[((m / MB) * R + r) * MB + m % MB] = w[m * R + r];
    for (Py_ssize_t c = 0, r = 0; c < C; c++)
        for (Py_ssize_t ky = 0; ky < KH; ky++)
            for (Py_ssize_t kx = 0; kx < KW; kx++, r++)
                off[r] = ((kx * dw % sw * C + c) * Hp + ky * dh) * Wp + kx * dw / sw;
    /* the input rows and columns that the windows read (the rest of P stays zero) */
    Py_ssize_t rows = H < Hp - pt ? H : Hp - pt, cols = W < Wlog - pl ? W : Wlog - pl;
    for (Py_ssize_t n = 0; n < N; n++) {
        const float *xs = x + n * C * H * W;
        if (rows > 0 && cols > 0)
            for (Py_ssize_t c = 0; c < C; c++)
                for (Py_ssize_t r = 0; r < rows; r++) {
                    const float *src = xs + (c * H + r) * W;
                    if (sw == 1) {
                        memcpy(P + (c * Hp + pt + r) * Wp + pl, src,
                               (size_t)cols * sizeof(float));
                        continue;
                    }
                    for (Py_ssize_t ph = 0; ph < sw; ph++) { /* padded columns j = ph mod sw */
                        Py_ssize_t j = pl + (ph - pl % sw + sw) % sw; /* the first >= pl */
                        float *dst = P + ((ph * C + c) * Hp + pt + r) * Wp + j / sw;
                        for (; j < pl + cols; j += sw) *dst++ = src[j - pl];
                    }
                }
        conv_sample(P, Wp, wp, off, R, M, OH, OW, sh, b, relu, y + n * M * OH * OW);
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(off);
    free(wp);
    free(P);
    PyBuffer_Release(&bx);
    PyBuffer_Release(&bw);
    if (has_b) PyBuffer_Release(&bb);
    PyBuffer_Release(&by);
    return result;
too_large:
    PyErr_SetString(PyExc_ValueError, "conv2d: sizes too large");
    return NULL;
}

static PyObject *ck_dwconv2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "dwconv2d(x, w, b, y, dims, relu)");
        return NULL;
    }
    Py_ssize_t d[15];
    PyObject *dims = args[4];
    if (!PyTuple_Check(dims) || PyTuple_GET_SIZE(dims) != 15) {
        PyErr_SetString(PyExc_TypeError, "dwconv2d: dims is a tuple of 15 ints");
        return NULL;
    }
    for (int i = 0; i < 15; i++) {
        d[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(dims, i));
        if (d[i] == -1 && PyErr_Occurred()) return NULL;
    }
    Py_ssize_t N = d[0], C = d[1], H = d[2], W = d[3], M = d[4], KH = d[5], KW = d[6];
    Py_ssize_t pt = d[7], pl = d[8], OH = d[9], OW = d[10], sh = d[11], sw = d[12];
    Py_ssize_t dh = d[13], dw = d[14];
    long act = PyLong_AsLong(args[5]); /* 0, ACT_RELU (True) or ACT_SILU */
    if (act == -1 && PyErr_Occurred()) return NULL;
    if (act < 0 || act > ACT_SILU) {
        PyErr_Format(PyExc_ValueError, "conv: activation %ld is not 0, 1 (relu) or 2 (silu)", act);
        return NULL;
    }
    int relu = (int)act;
    const Py_ssize_t LIM = (Py_ssize_t)1 << 40;
    for (int i = 0; i < 15; i++) {
        Py_ssize_t lo = (i == 7 || i == 8) ? 0 : 1;
        if (d[i] < lo || d[i] > LIM) {
            PyErr_Format(PyExc_ValueError, "dwconv2d: dimension %d is %zd", i, d[i]);
            return NULL;
        }
    }
    if (M != C) {
        PyErr_SetString(PyExc_ValueError, "dwconv2d: one output channel per input channel");
        return NULL;
    }
    /* one channel's padded plane, laid out as conv2d's (columns split into sw phases), with
     * DR * sh rows of slack after the last phase for the rows a block computes past OH */
    Py_ssize_t t1 = mul_lim(OH - 1, sh, LIM), t2 = mul_lim(KH - 1, dh, LIM);
    Py_ssize_t t3 = mul_lim(OW - 1, sw, LIM), t4 = mul_lim(KW - 1, dw, LIM);
    if (t1 < 0 || t2 < 0 || t3 < 0 || t4 < 0) goto too_large;
    Py_ssize_t Hp = t1 + t2 + 1;
    Py_ssize_t Wlog = t3 + t4 + 1;
    Py_ssize_t Wp = (Wlog + sw - 1) / sw + 16;
    Py_ssize_t R = mul_lim(KH, KW, LIM);
    Py_ssize_t nx = mul_lim(mul_lim(mul_lim(N, C, LIM), H, LIM), W, LIM);
    Py_ssize_t nw = mul_lim(C, R, LIM);
    Py_ssize_t ny = mul_lim(mul_lim(mul_lim(N, M, LIM), OH, LIM), OW, LIM);
    Py_ssize_t rows_p = mul_lim(sw, Hp, LIM);
    Py_ssize_t np_ = rows_p < 0 ? -1 : mul_lim(rows_p + DR * sh + 1, Wp, LIM);
    if (R < 0 || nx < 0 || nw < 0 || ny < 0 || np_ < 0) goto too_large;
    Py_buffer bx, bw, bb, by;
    if (get_buffer(args[0], &bx, 0, nx, "x") < 0) return NULL;
    if (get_buffer(args[1], &bw, 0, nw, "w") < 0) {
        PyBuffer_Release(&bx);
        return NULL;
    }
    int has_b = args[2] != Py_None;
    if (has_b && get_buffer(args[2], &bb, 0, M, "b") < 0) {
        PyBuffer_Release(&bx);
        PyBuffer_Release(&bw);
        return NULL;
    }
    if (get_buffer(args[3], &by, 1, ny, "y") < 0) {
        PyBuffer_Release(&bx);
        PyBuffer_Release(&bw);
        if (has_b) PyBuffer_Release(&bb);
        return NULL;
    }
    float *P = calloc((size_t)np_, sizeof(float));
    Py_ssize_t *off = malloc((size_t)R * sizeof(Py_ssize_t));
    PyObject *result = NULL;
    if (!P || !off) {
        PyErr_NoMemory();
        goto done;
    }
    const float *x = bx.buf, *w = bw.buf, *b = has_b ? (const float *)bb.buf : NULL;
    float *y = by.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t ky = 0, r = 0; ky < KH; ky++)
        for (Py_ssize_t kx = 0; kx < KW; kx++, r++)
            off[r] = (kx * dw % sw * Hp + ky * dh) * Wp + kx * dw / sw;
    Py_ssize_t rows = H < Hp - pt ? H : Hp - pt, cols = W < Wlog - pl ? W : Wlog - pl;
    for (Py_ssize_t n = 0; n < N; n++)
        for (Py_ssize_t c = 0; c < C; c++) {
            const float *xs = x + (n * C + c) * H * W;
            /* the rows and columns the windows read; the padding stays zero (every channel
             * writes the same places) */
            if (rows > 0 && cols > 0)
                for (Py_ssize_t r = 0; r < rows; r++) {
                    const float *src = xs + r * W;
                    if (sw == 1) {
                        memcpy(P + (pt + r) * Wp + pl, src, (size_t)cols * sizeof(float));
                        continue;
                    }
                    for (Py_ssize_t ph = 0; ph < sw; ph++) {
                        Py_ssize_t j = pl + (ph - pl % sw + sw) % sw;
                        float *dst = P + (ph * Hp + pt + r) * Wp + j / sw;
                        for (; j < pl + cols; j += sw) *dst++ = src[j - pl];
                    }
                }
            dw_channel(P, Wp, w + c * R, off, R, OH, OW, sh, b ? b[c] : 0.0f, relu,
                       y + (n * M + c) * OH * OW);
        }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(off);
    free(P);
    PyBuffer_Release(&bx);
    PyBuffer_Release(&bw);
    if (has_b) PyBuffer_Release(&bb);
    PyBuffer_Release(&by);
    return result;
too_large:
    PyErr_SetString(PyExc_ValueError, "dwconv2d: sizes too large");
    return NULL;
}

/* ---- exp_rows --------------------------------------------------------------------------- */

/* exp8 for x in [-87, 0] (or NaN): there 2^n is a normal float (n >= -126), so p * 2^n is the
 * one rounding exp8 gives, bit for bit, without its clamp and its two-step scaling */
INLINE v8 exp8_normal(v8 x) {
    const v8 magic = bc(12582912.0f);
    v8 n = (x * bc(1.44269504088896341f) + magic) - magic;
    v8 r = x - n * bc(0.693359375f);
    r = r - n * bc(-2.12194440e-4f);
    v8 p = bc(1.9875691500e-4f);
    p = p * r + bc(1.3981999507e-3f);
    p = p * r + bc(8.3334519073e-3f);
    p = p * r + bc(4.1665795894e-2f);
    p = p * r + bc(1.6666665459e-1f);
    p = p * r + bc(5.0000001201e-1f);
    p = p * (r * r) + r + bc(1.0f);
    v8i ni = __builtin_convertvector(n, v8i);
    return p * (v8)((ni + 127) << 23);
}

MULTIVERSION
static void exp_rows_impl(const float *a, float *out, float *sums, Py_ssize_t rows,
                          Py_ssize_t n) {
    Py_ssize_t n8 = n / 8 * 8;
    for (Py_ssize_t r = 0; r < rows; r++) {
        const float *src = a + r * n;
        float *dst = out + r * n;
        /* the row maximum (NaN propagates: a NaN lane makes the maximum NaN) and minimum */
        float mx = -INFINITY, mn = INFINITY;
        int has_nan = 0;
        v8 vm = bc(-INFINITY), vl = bc(INFINITY);
        v8i vn = {0, 0, 0, 0, 0, 0, 0, 0};
        for (Py_ssize_t i = 0; i < n8; i += 8) {
            v8 v = load8(src + i);
            vn |= (v8i)(v != v);
            vm = select8((v8i)(v > vm), v, vm);
            vl = select8((v8i)(v < vl), v, vl);
        }
        for (int k = 0; k < 8; k++) {
            if (vm[k] > mx) mx = vm[k];
            if (vl[k] < mn) mn = vl[k];
            has_nan |= vn[k];
        }
        for (Py_ssize_t i = n8; i < n; i++) {
            if (src[i] != src[i]) has_nan = 1;
            if (src[i] > mx) mx = src[i];
            if (src[i] < mn) mn = src[i];
        }
        if (has_nan) mx = NAN;
        /* every shifted value in [-87, 0]: exp8_normal, the same bits (see attention) */
        int normal = !has_nan && mn - mx >= -87.0f;
        v8 shift = bc(mx), acc = bc(0.0f);
        for (Py_ssize_t i = 0; i < n8; i += 8) {
            v8 x = load8(src + i) - shift;
            v8 e = normal ? exp8_normal(x) : exp8(x);
            store8(dst + i, e);
            acc += e;
        }
        if (n8 < n) {
            float t[8];
            for (int k = 0; k < 8; k++) t[k] = n8 + k < n ? src[n8 + k] : -INFINITY;
            v8 e = exp8(load8(t) - shift);
            store8(t, e);
            for (Py_ssize_t k = 0; n8 + k < n; k++) dst[n8 + k] = t[k];
            acc += e;
        }
        float s = 0.0f;
        for (int k = 0; k < 8; k++) s += acc[k];
        sums[r] = s;
    }
}

static PyObject *ck_exp_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "exp_rows(a, out, sums, rows, n)");
        return NULL;
    }
    Py_ssize_t rows, n;
    if (get_rows(args[3], args[4], &rows, &n, "exp_rows") < 0) return NULL;
    Py_buffer ba, bo, bs;
    if (get_buffer(args[0], &ba, 0, rows * n, "a") < 0) return NULL;
    if (get_buffer(args[1], &bo, 1, rows * n, "out") < 0) {
        PyBuffer_Release(&ba);
        return NULL;
    }
    if (get_buffer(args[2], &bs, 1, rows, "sums") < 0) {
        PyBuffer_Release(&ba);
        PyBuffer_Release(&bo);
        return NULL;
    }
    const float *a = ba.buf;
    float *o = bo.buf, *s = bs.buf;
    Py_BEGIN_ALLOW_THREADS
    exp_rows_impl(a, o, s, rows, n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&ba);
    PyBuffer_Release(&bo);
    PyBuffer_Release(&bs);
    Py_RETURN_NONE;
}

/* ---- layer_norm ------------------------------------------------------------------------ */

typedef double v4d __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

/* the sum of n floats in double, in 8 lanes (no float32 sum can overflow) */
INLINE double sum_lanes(const float *x, Py_ssize_t n) {
    v4d s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0};
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v4f a, b;
        memcpy(&a, x + i, sizeof a);
        memcpy(&b, x + i + 4, sizeof b);
        s0 += __builtin_convertvector(a, v4d);
        s1 += __builtin_convertvector(b, v4d);
    }
    v4d t = s0 + s1;
    double s = (t[0] + t[1]) + (t[2] + t[3]);
    for (; i < n; i++) s += x[i];
    return s;
}

/* the sum of (x - mean)^2 likewise, each difference and square in double */
INLINE double sum_squares(const float *x, Py_ssize_t n, double mean) {
    v4d s0 = {0, 0, 0, 0}, s1 = {0, 0, 0, 0}, m = {mean, mean, mean, mean};
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v4f a, b;
        memcpy(&a, x + i, sizeof a);
        memcpy(&b, x + i + 4, sizeof b);
        v4d d0 = __builtin_convertvector(a, v4d) - m, d1 = __builtin_convertvector(b, v4d) - m;
        s0 += d0 * d0;
        s1 += d1 * d1;
    }
    v4d t = s0 + s1;
    double s = (t[0] + t[1]) + (t[2] + t[3]);
    for (; i < n; i++) {
        double d = x[i] - mean;
        s += d * d;
    }
    return s;
}

MULTIVERSION
static void layer_norm_impl(const float *x, const float *res, const Py_ssize_t *roff,
                            const float *scale, const float *bias, float *y, float *mean,
                            float *inv, Py_ssize_t rows, Py_ssize_t n, float eps) {
    for (Py_ssize_t r = 0; r < rows; r++) {
        const float *src = x + r * n;
        float *dst = y + r * n;
        if (res) { /* the row of x + residual first, normalized in place */
            const float *rr = res + roff[r];
            Py_ssize_t i = 0;
            for (; i + 8 <= n; i += 8) store8(dst + i, load8(src + i) + load8(rr + i));
            for (; i < n; i++) dst[i] = src[i] + rr[i];
            src = dst;
        }
        float mu = (float)(sum_lanes(src, n) / (double)n);
        float var = (float)(sum_squares(src, n, (double)mu) / (double)n);
        float iv = 1.0f / sqrtf(var + eps);
        mean[r] = mu;
        inv[r] = iv;
        v8 vm = bc(mu), vi = bc(iv);
        Py_ssize_t i = 0;
        for (; i + 8 <= n; i += 8) {
            v8 o = (load8(src + i) - vm) * vi * load8(scale + i);
            if (bias) o += load8(bias + i);
            store8(dst + i, o);
        }
        for (; i < n; i++) {
            float o = (src[i] - mu) * iv * scale[i];
            if (bias) o += bias[i];
            dst[i] = o;
        }
    }
}

static PyObject *ck_layer_norm(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 9 && nargs != 10) {
        PyErr_SetString(PyExc_TypeError,
                        "layer_norm(x, scale, bias, y, mean, inv, rows, n, epsilon[, residual])");
        return NULL;
    }
    Py_ssize_t rows, n;
    if (get_rows(args[6], args[7], &rows, &n, "layer_norm") < 0) return NULL;
    double eps = PyFloat_AsDouble(args[8]);
    if (eps == -1.0 && PyErr_Occurred()) return NULL;
    Py_buffer bx, bs, bb, by, bm, bi, br;
    int has_b = args[2] != Py_None, has_r = nargs == 10 && args[9] != Py_None;
    Py_ssize_t *roff = NULL; /* the offset of each row of the residual, in floats */
    if (has_r) {
        if (get_strided(args[9], &br, -1, 0, "residual") < 0) return NULL;
        int nd = br.ndim, ok = nd >= 1 && br.shape[nd - 1] == n &&
                                (br.strides[nd - 1] == 4 || n == 1);
        Py_ssize_t lead = 1;
        for (int a = 0; ok && a < nd - 1; a++) lead *= br.shape[a]; /* (a valid buffer's) */
        if (!ok || lead != rows) {
            PyErr_Format(PyExc_ValueError, "residual: rows of %zd packed float32 values, %zd "
                         "rows expected", n, rows);
            goto fail_r;
        }
        roff = malloc((size_t)(rows ? rows : 1) * sizeof(Py_ssize_t));
        if (!roff) {
            PyErr_NoMemory();
            goto fail_r;
        }
        for (Py_ssize_t r = 0; r < rows; r++) roff[r] = lead_offset(&br, nd - 1, r);
    }
    if (get_buffer(args[0], &bx, 0, rows * n, "x") < 0) goto fail_r;
    if (get_buffer(args[1], &bs, 0, n, "scale") < 0) goto fail_x;
    if (has_b && get_buffer(args[2], &bb, 0, n, "bias") < 0) goto fail_s;
    if (get_buffer(args[3], &by, 1, rows * n, "y") < 0) goto fail_b;
    if (get_buffer(args[4], &bm, 1, rows, "mean") < 0) goto fail_y;
    if (get_buffer(args[5], &bi, 1, rows, "inv") < 0) goto fail_m;
    const float *x = bx.buf, *sc = bs.buf, *bias = has_b ? (const float *)bb.buf : NULL;
    float *y = by.buf, *mean = bm.buf, *inv = bi.buf;
    float e = (float)eps;
    Py_BEGIN_ALLOW_THREADS
    layer_norm_impl(x, has_r ? (const float *)br.buf : NULL, roff, sc, bias, y, mean, inv, rows,
                    n, e);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&bi);
    PyBuffer_Release(&bm);
    PyBuffer_Release(&by);
    if (has_b) PyBuffer_Release(&bb);
    PyBuffer_Release(&bs);
    PyBuffer_Release(&bx);
    if (has_r) PyBuffer_Release(&br);
    free(roff);
    Py_RETURN_NONE;
fail_m:
    PyBuffer_Release(&bm);
fail_y:
    PyBuffer_Release(&by);
fail_b:
    if (has_b) PyBuffer_Release(&bb);
fail_s:
    PyBuffer_Release(&bs);
fail_x:
    PyBuffer_Release(&bx);
fail_r:
    if (has_r) PyBuffer_Release(&br);
    free(roff);
    return NULL;
}

/* ---- attention --------------------------------------------------------------------------- */

#define RB 6      /* query rows a tile: 6 rows by 2 vectors, 12 accumulators (registers) */
#define MAXDV 128 /* value columns at most */
#define HG 8       /* heads packed at a time */

/* scores of R query rows (q, row stride d) for the 8 NC columns from j0 (kt: d x n8, k
 * transposed) into s (R rows of n8): per score one sum over d in order, R * NC independent
 * sums a step (registers: R and NC are constants where this is inlined). Columns from n on
 * (the padding of the last tile) are stored as -inf; each row's running maximum (vmax) and NaN
 * lanes (vnan) take in the tile's scores. */
INLINE void score_tile(const float *q, Py_ssize_t d, const float *kt, Py_ssize_t n,
                       Py_ssize_t n8, Py_ssize_t j0, const int R, const int NC, float *s,
                       v8 *vmax, v8 *vmin, v8i *vnan) {
    v8 acc[RB][2];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < NC; c++) acc[r][c] = bc(0.0f);
    for (Py_ssize_t dd = 0; dd < d; dd++) {
        const float *kr = kt + dd * n8 + j0;
        v8 k0 = load8(kr), k1 = NC > 1 ? load8(kr + 8) : k0;
        for (int r = 0; r < R; r++) {
            v8 qb = bc(q[r * d + dd]);
            acc[r][0] += qb * k0;
            if (NC > 1) acc[r][1] += qb * k1;
        }
    }
    int last = j0 + 8 * NC > n;
    if (last) { /* the last tile: its columns from n on are padding */
        const v8i lane = {0, 1, 2, 3, 4, 5, 6, 7};
        for (int c = 0; c < NC; c++) {
            Py_ssize_t valid = n - j0 - 8 * c; /* columns of this vector before n */
            v8i pad = lane >= (int32_t)(valid < 0 ? 0 : valid > 8 ? 8 : valid);
            for (int r = 0; r < R; r++) {
                vmin[r] = select8((v8i)(acc[r][c] < vmin[r]) & ~pad, acc[r][c], vmin[r]);
                acc[r][c] = select8(pad, bc(-INFINITY), acc[r][c]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < NC; c++) {
            v8 x = acc[r][c];
            vnan[r] |= (v8i)(x != x);
            vmax[r] = select8((v8i)(x > vmax[r]), x, vmax[r]);
            if (!last) vmin[r] = select8((v8i)(x < vmin[r]), x, vmin[r]);
            store8(s + r * n8 + j0 + 8 * c, x);
        }
}

/* out rows (R of them, ``os`` floats apart) at columns [c0, c0 + 8 NC) = sum over j in order of
 * p[r][j] vp[j] (p: R rows of n8, vp: n x dv8, v with rows padded to whole vectors) */
INLINE void value_tile(const float *p, Py_ssize_t n8, const float *vp, Py_ssize_t n,
                       Py_ssize_t dv8, Py_ssize_t c0, const int R, const int NC, float *o,
                       Py_ssize_t dv, Py_ssize_t os) {
    v8 acc[RB][2];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < NC; c++) acc[r][c] = bc(0.0f);
    for (Py_ssize_t j = 0; j < n; j++) {
        const float *vr = vp + j * dv8 + c0;
        v8 v0 = load8(vr), v1 = NC > 1 ? load8(vr + 8) : v0;
        for (int r = 0; r < R; r++) {
            v8 pb = bc(p[r * n8 + j]);
            acc[r][0] += pb * v0;
            if (NC > 1) acc[r][1] += pb * v1;
        }
    }
    Py_ssize_t cols = dv - c0 < 8 * NC ? dv - c0 : 8 * NC;
    for (int r = 0; r < R; r++) {
        float t[16];
        for (int c = 0; c < NC; c++) store8(t + 8 * c, acc[r][c]);
        memcpy(o + r * os + c0, t, (size_t)cols * sizeof(float));
    }
}

/* one row of n scores (s, n8 long, -inf from n on; vmax and vnan: its lanes' maximum and NaN
 * flags) made probabilities in place: exp(score - row max) as exp_rows computes it, the row
 * sum in 8 lanes, each exponential divided by it (as Softmax rounds them); the padding lanes
 * [n, n8) become 0 */
INLINE void softmax_row(float *s, Py_ssize_t n, Py_ssize_t n8, v8 vmax, v8 vmin, v8i vnan) {
    float mx = -INFINITY, mn = INFINITY;
    int has_nan = 0;
    for (int l = 0; l < 8; l++) {
        if (vmax[l] > mx) mx = vmax[l];
        if (vmin[l] < mn) mn = vmin[l];
        has_nan |= vnan[l];
    }
    if (has_nan) mx = NAN;
    /* every shifted score in [-87, 0] (x = score - max >= min - max, rounding being monotone):
     * the exponentials without exp8's handling of the subnormal range, the same bits */
    int normal = !has_nan && mn - mx >= -87.0f;
    v8 shift = bc(mx), vsum = bc(0.0f);
    for (Py_ssize_t j = 0; j < n8; j += 8) {
        v8 x = load8(s + j) - shift;
        v8 e = normal && j + 8 <= n ? exp8_normal(x) : exp8(x);
        if (j + 8 > n) /* the padding lanes: -inf - shift, 0 unless the shift is NaN */
            for (Py_ssize_t l = n - j; l < 8; l++) e[l] = 0.0f;
        store8(s + j, e);
        vsum += e;
    }
    float sum = 0.0f;
    for (int l = 0; l < 8; l++) sum += vsum[l];
    /* the probabilities, as Softmax rounds them (dividing the products with v instead would
     * overflow where |v| n exceeds the largest float) */
    v8 vs = bc(sum);
    for (Py_ssize_t j = 0; j < n8; j += 8) store8(s + j, load8(s + j) / vs);
}

/* R query rows from q (and out) of one head: scores, probabilities, products with v */
INLINE void attention_rows(const float *q, Py_ssize_t d, const float *kt, Py_ssize_t n,
                           Py_ssize_t n8, const float *vp, Py_ssize_t dv, Py_ssize_t dv8,
                           const int R, float *s, float *o, Py_ssize_t os) {
    v8 vmax[RB], vmin[RB];
    v8i vnan[RB];
    for (int r = 0; r < R; r++) {
        vmax[r] = bc(-INFINITY);
        vmin[r] = bc(INFINITY);
        vnan[r] = (v8i){0, 0, 0, 0, 0, 0, 0, 0};
    }
    Py_ssize_t j0 = 0;
    for (; j0 + 16 <= n8; j0 += 16) score_tile(q, d, kt, n, n8, j0, R, 2, s, vmax, vmin, vnan);
    if (j0 < n8) score_tile(q, d, kt, n, n8, j0, R, 1, s, vmax, vmin, vnan);
    for (int r = 0; r < R; r++) softmax_row(s + r * n8, n, n8, vmax[r], vmin[r], vnan[r]);
    Py_ssize_t c0 = 0;
    for (; c0 + 16 <= dv8; c0 += 16) value_tile(s, n8, vp, n, dv8, c0, R, 2, o, dv, os);
    if (c0 < dv8) value_tile(s, n8, vp, n, dv8, c0, R, 1, o, dv, os);
}

/* One head: out[m][dv] = softmax(q[m][d] . kt[d][n], over n) . v[n][dv], RB query rows at a
 * time, from packed copies: q packed m x d, kt d x n8 (rows padded with zeros), vp n x dv8
 * (rows padded to whole vectors); s: RB x n8 scratch (the rows' scores, then probabilities);
 * out's rows ``os`` floats apart. */
MULTIVERSION
static void attention_head(const float *q, const float *kt, const float *vp, float *out,
                           Py_ssize_t m, Py_ssize_t d, Py_ssize_t n, Py_ssize_t dv, float *s,
                           Py_ssize_t os) {
    Py_ssize_t n8 = (n + 7) / 8 * 8, dv8 = (dv + 7) / 8 * 8;
    Py_ssize_t i = 0;
    for (; i + RB <= m; i += RB)
        attention_rows(q + i * d, d, kt, n, n8, vp, dv, dv8, RB, s, out + i * os, os);
    switch (m - i) { /* the last rows: a constant count each, so that the tiles stay registers */
    case 5: attention_rows(q + i * d, d, kt, n, n8, vp, dv, dv8, 5, s, out + i * os, os); break;
    case 4: attention_rows(q + i * d, d, kt, n, n8, vp, dv, dv8, 4, s, out + i * os, os); break;
    case 3: attention_rows(q + i * d, d, kt, n, n8, vp, dv, dv8, 3, s, out + i * os, os); break;
    case 2: attention_rows(q + i * d, d, kt, n, n8, vp, dv, dv8, 2, s, out + i * os, os); break;
    case 1: attention_rows(q + i * d, d, kt, n, n8, vp, dv, dv8, 1, s, out + i * os, os); break;
    default: break;
    }
}

/* one matrix of each of g heads: element (r, c) of head t at base[t] + r * rs + c * cs (strides
 * in floats, one pair for every head) */
typedef struct {
    const float *base[HG];
    Py_ssize_t rs, cs;
} strided;

/* rows x cols of each of the g matrices into dst + t * size (row pitch ``pitch`` >= cols, zeros
 * after cols), each value times ``scale`` when ``scaled`` (the float32 product, as Mul computes
 * it). The source is read along its smaller stride innermost, the heads in between: for the
 * views a Transpose gives of [seq, batch, heads, d], where the rows of consecutive heads lie
 * next to one another, that reads runs of g rows instead of one row a page. */
MULTIVERSION
static void pack(const strided *a, int g, Py_ssize_t rows, Py_ssize_t cols, float *dst,
                 Py_ssize_t size, Py_ssize_t pitch, int scaled, float scale) {
    Py_ssize_t ars = a->rs < 0 ? -a->rs : a->rs, acs = a->cs < 0 ? -a->cs : a->cs;
    Py_ssize_t cs = a->cs, rs = a->rs;
    if (acs <= ars) {
        for (Py_ssize_t r = 0; r < rows; r++)
            for (int t = 0; t < g; t++) {
                const float *src = a->base[t] + r * rs;
                float *row = dst + t * size + r * pitch;
                if (cs == 1 && scaled) /* (loops the compiler turns into vectors) */
                    for (Py_ssize_t c = 0; c < cols; c++) row[c] = src[c] * scale;
                else if (cs == 1)
                    for (Py_ssize_t c = 0; c < cols; c++) row[c] = src[c];
                else
                    for (Py_ssize_t c = 0; c < cols; c++)
                        row[c] = scaled ? src[c * cs] * scale : src[c * cs];
            }
    } else {
        for (Py_ssize_t c = 0; c < cols; c++)
            for (int t = 0; t < g; t++) {
                const float *src = a->base[t] + c * cs;
                float *col = dst + t * size + c;
                if (rs == 1 && scaled)
                    for (Py_ssize_t r = 0; r < rows; r++) col[r * pitch] = src[r] * scale;
                else if (rs == 1)
                    for (Py_ssize_t r = 0; r < rows; r++) col[r * pitch] = src[r];
                else
                    for (Py_ssize_t r = 0; r < rows; r++)
                        col[r * pitch] = scaled ? src[r * rs] * scale : src[r * rs];
            }
    }
    if (pitch > cols)
        for (int t = 0; t < g; t++)
            for (Py_ssize_t r = 0; r < rows; r++)
                for (Py_ssize_t c = cols; c < pitch; c++) dst[t * size + r * pitch + c] = 0.0f;
}

static PyObject *ck_attention(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "attention(q, k, v, out, scale_q, scale_k)");
        return NULL;
    }
    int has_sq = args[4] != Py_None, has_sk = args[5] != Py_None;
    double sq = has_sq ? PyFloat_AsDouble(args[4]) : 1.0;
    if (sq == -1.0 && PyErr_Occurred()) return NULL;
    double sk = has_sk ? PyFloat_AsDouble(args[5]) : 1.0;
    if (sk == -1.0 && PyErr_Occurred()) return NULL;
    PyObject *qo = args[0];
    Py_buffer bq, bk, bv, bo;
    if (PyObject_GetBuffer(qo, &bq, PyBUF_RECORDS_RO) < 0) return NULL;
    int nd = bq.ndim;
    PyBuffer_Release(&bq);
    if (nd < 3) {
        PyErr_SetString(PyExc_ValueError, "attention: q [..., m, d] of 3 axes or more expected");
        return NULL;
    }
    if (get_strided(args[0], &bq, nd, 0, "q") < 0) return NULL;
    if (get_strided(args[1], &bk, nd, 0, "k") < 0) goto fail_q;
    if (get_strided(args[2], &bv, nd, 0, "v") < 0) goto fail_k;
    Py_ssize_t m = bq.shape[nd - 2], d = bq.shape[nd - 1], n = bk.shape[nd - 1],
               dv = bv.shape[nd - 1];
    int same = bk.shape[nd - 2] == d && bv.shape[nd - 2] == n;
    for (int i = 0; same && i < nd - 2; i++)
        same = bk.shape[i] == bq.shape[i] && bv.shape[i] == bq.shape[i];
    if (!same || m < 1 || d < 1 || n < 1 || dv < 1 || dv > MAXDV) {
        PyErr_Format(PyExc_ValueError, "attention: q [..., m, d], k [..., d, n], v [..., n, dv] "
                     "of one batch shape, each size >= 1, dv <= %d expected", MAXDV);
        goto fail_v;
    }
    const Py_ssize_t LIM = (Py_ssize_t)1 << 40;
    Py_ssize_t H = 1;
    for (int i = 0; i < nd - 2 && H >= 0; i++) H = mul_lim(H, bq.shape[i], LIM);
    Py_ssize_t n8 = (n + 7) / 8 * 8, dv8 = (dv + 7) / 8 * 8;
    Py_ssize_t no = mul_lim(mul_lim(H, m, LIM), dv, LIM);
    Py_ssize_t nqs = mul_lim(m, d, LIM), nkt = mul_lim(d, n8, LIM), nvp = mul_lim(n, dv8, LIM),
               ns = mul_lim(RB, n8, LIM);
    Py_ssize_t nscratch = nqs < 0 || nkt < 0 || nvp < 0 ? -1 : mul_lim(HG, nqs + nkt + nvp, LIM);
    if (H < 1 || no < 0 || nscratch < 0 || ns < 0) {
        PyErr_SetString(PyExc_ValueError, "attention: sizes too large");
        goto fail_v;
    }
    if (get_strided(args[3], &bo, nd, 1, "out") < 0) goto fail_v;
    int fits = (bo.strides[nd - 1] == 4 || dv == 1) && bo.shape[nd - 1] == dv;
    for (int i = 0; fits && i < nd - 1; i++) fits = bo.shape[i] == bq.shape[i];
    if (!fits) {
        PyErr_SetString(PyExc_ValueError, "out: [..., m, dv] float32 of q's batch shape, its "
                        "rows packed, expected");
        PyBuffer_Release(&bo);
        goto fail_v;
    }
    float *qs = malloc((size_t)nscratch * sizeof(float));
    float *sc = malloc((size_t)ns * sizeof(float));
    if (!qs || !sc) {
        free(qs);
        free(sc);
        PyErr_NoMemory();
        PyBuffer_Release(&bo);
        goto fail_v;
    }
    float *kt = qs + HG * nqs, *vp = kt + HG * nkt;
    float *o = bo.buf;
    float fq = (float)sq, fk = (float)sk;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t h0 = 0; h0 < H; h0 += HG) {
        int g = H - h0 < HG ? (int)(H - h0) : HG;
        strided q = {{0}, bq.strides[nd - 2] / 4, bq.strides[nd - 1] / 4};
        strided k = {{0}, bk.strides[nd - 2] / 4, bk.strides[nd - 1] / 4};
        strided v = {{0}, bv.strides[nd - 2] / 4, bv.strides[nd - 1] / 4};
        for (int t = 0; t < g; t++) {
            q.base[t] = (const float *)bq.buf + lead_offset(&bq, nd - 2, h0 + t);
            k.base[t] = (const float *)bk.buf + lead_offset(&bk, nd - 2, h0 + t);
            v.base[t] = (const float *)bv.buf + lead_offset(&bv, nd - 2, h0 + t);
        }
        pack(&q, g, m, d, qs, nqs, d, has_sq, fq);
        pack(&k, g, d, n, kt, nkt, n8, has_sk, fk);
        pack(&v, g, n, dv, vp, nvp, dv8, 0, 1.0f);
        for (int t = 0; t < g; t++)
            attention_head(qs + t * nqs, kt + t * nkt, vp + t * nvp,
                           o + lead_offset(&bo, nd - 2, h0 + t), m, d, n, dv, sc,
                           bo.strides[nd - 2] / 4);
    }
    Py_END_ALLOW_THREADS
    free(qs);
    free(sc);
    PyBuffer_Release(&bo);
    PyBuffer_Release(&bv);
    PyBuffer_Release(&bk);
    PyBuffer_Release(&bq);
    Py_RETURN_NONE;
fail_v:
    PyBuffer_Release(&bv);
fail_k:
    PyBuffer_Release(&bk);
fail_q:
    PyBuffer_Release(&bq);
    return NULL;
}

/* ---- sigmoid ------------------------------------------------------------------------------ */

MULTIVERSION
static void sigmoid_impl(const float *x, float *y, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) store8(y + i, sigmoid8(load8(x + i)));
    if (i < n) { /* the last values, through a vector padded with zeros */
        float t[8] = {0};
        memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
        store8(t, sigmoid8(load8(t)));
        memcpy(y + i, t, (size_t)(n - i) * sizeof(float));
    }
}

static PyObject *ck_sigmoid(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "sigmoid(x, y, n)");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[2]);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0 || n > ((Py_ssize_t)1 << 40)) {
        PyErr_Format(PyExc_ValueError, "sigmoid: n is %zd", n);
        return NULL;
    }
    Py_buffer bx, by;
    if (get_buffer(args[0], &bx, 0, n, "x") < 0) return NULL;
    if (get_buffer(args[1], &by, 1, n, "y") < 0) {
        PyBuffer_Release(&bx);
        return NULL;
    }
    const float *x = bx.buf;
    float *y = by.buf;
    Py_BEGIN_ALLOW_THREADS
    sigmoid_impl(x, y, n);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&by);
    PyBuffer_Release(&bx);
    Py_RETURN_NONE;
}

/* ---- bias_relu ---------------------------------------------------------------------------- */

MULTIVERSION
static void bias_relu_impl(const float *x, const float *bias, float *y, Py_ssize_t rows,
                           Py_ssize_t n, int relu) {
    const v8 zero = bc(0.0f);
    for (Py_ssize_t r = 0; r < rows; r++) {
        const float *src = x + r * n;
        float *dst = y + r * n;
        Py_ssize_t i = 0;
        for (; i + 8 <= n; i += 8) {
            v8 o = load8(src + i);
            if (bias) o += load8(bias + i);
            if (relu) /* max(o, 0): NaN stays NaN, -0 becomes +0 (as numpy.maximum) */
                o = select8((v8i)(o > zero) | (v8i)(o != o), o, zero);
            store8(dst + i, o);
        }
        for (; i < n; i++) {
            float o = src[i];
            if (bias) o += bias[i];
            if (relu && !(o > 0.0f) && o == o) o = 0.0f;
            dst[i] = o;
        }
    }
}

static PyObject *ck_bias_relu(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "bias_relu(x, bias, y, rows, n, relu)");
        return NULL;
    }
    Py_ssize_t rows, n;
    if (get_rows(args[3], args[4], &rows, &n, "bias_relu") < 0) return NULL;
    int relu = PyObject_IsTrue(args[5]);
    if (relu < 0) return NULL;
    Py_buffer bx, bb, by;
    int has_b = args[1] != Py_None;
    if (get_buffer(args[0], &bx, 0, rows * n, "x") < 0) return NULL;
    if (has_b && get_buffer(args[1], &bb, 0, n, "bias") < 0) {
        PyBuffer_Release(&bx);
        return NULL;
    }
    if (get_buffer(args[2], &by, 1, rows * n, "y") < 0) {
        if (has_b) PyBuffer_Release(&bb);
        PyBuffer_Release(&bx);
        return NULL;
    }
    const float *x = bx.buf, *bias = has_b ? (const float *)bb.buf : NULL;
    float *y = by.buf;
    Py_BEGIN_ALLOW_THREADS
    bias_relu_impl(x, bias, y, rows, n, relu);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&by);
    if (has_b) PyBuffer_Release(&bb);
    PyBuffer_Release(&bx);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"attention", (PyCFunction)(void (*)(void))ck_attention, METH_FASTCALL,
     "attention(q, k, v, out, scale_q, scale_k): softmax(q k) v per head, float32."},
    {"layer_norm", (PyCFunction)(void (*)(void))ck_layer_norm, METH_FASTCALL,
     "layer_norm(x, scale, bias, y, mean, inv, rows, n, epsilon[, residual]): rows of n "
     "normalized."},
    {"conv2d", (PyCFunction)(void (*)(void))ck_conv2d, METH_FASTCALL,
     "conv2d(x, w, b, y, dims, relu): float32 2-D convolution of one group into y."},
    {"dwconv2d", (PyCFunction)(void (*)(void))ck_dwconv2d, METH_FASTCALL,
     "dwconv2d(x, w, b, y, dims, relu): float32 2-D depthwise convolution (group = C = M)."},
    {"bias_relu", (PyCFunction)(void (*)(void))ck_bias_relu, METH_FASTCALL,
     "bias_relu(x, bias, y, rows, n, relu): y = x + bias per row, then max(., 0) if relu."},
    {"sigmoid", (PyCFunction)(void (*)(void))ck_sigmoid, METH_FASTCALL,
     "sigmoid(x, y, n): y = 1 / (1 + exp(-x)) of n float32 values."},
    {"exp_rows", (PyCFunction)(void (*)(void))ck_exp_rows, METH_FASTCALL,
     "exp_rows(a, out, sums, rows, n): exp(row - row max) into out, row sums into sums."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_ckernels",
    "Compiled float32 kernels of onemodel's evaluator (optional accelerator).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ckernels(void) { return PyModule_Create(&module); }
