/* Iterations of BCRF's iterative Bregman projections on the linear state of a per-position
   kernel, in sweeps along each sequence that read every arc block from memory once for several
   iterations.

   The projections of an iteration read every arc twice: the first parity's nodes read each arc
   for the product with their neighbour's old scalings, the second parity's for the product with
   the first's new ones. Taken in node order, node n of the first parity reads arcs n - 1 and
   n (its in- and out-products) and is projected; at once the same two arcs, still in cache, give
   the second parity's products with its new scalings: node n - 1's out-product, whereupon node
   n - 1 (its in-product came with the step before) is projected, and node n + 1's in-product,
   kept for the next step. The arithmetic is that of `_linear_projected` in bcrf.py, node for
   node (docs/derivations.md §3.12, *The sweep*).

   Built by implementations/_sweep.py with the host's C compiler; this file includes itself once
   for float and once for double (REAL), so that both share one text. */
#ifndef REAL
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

typedef int64_t i64;
#define CAT_(a, b) a##_##b
#define CAT(a, b) CAT_(a, b)

#define REAL float
#define SUFFIX f32
#define LANES 16
#define SQRT sqrtf
#define LOG logf
#include "_sweep.c"
#undef REAL
#undef SUFFIX
#undef LANES
#undef SQRT
#undef LOG

#define REAL double
#define SUFFIX f64
#define LANES 8
#define SQRT sqrt
#define LOG log
#include "_sweep.c"

#else /* the functions for one REAL */

#define NAME(x) CAT(x, SUFFIX)
#define VL LANES       /* lanes of a 64-byte vector */
#define CH (8 * VL)    /* the columns of a column product kept in registers: 8 vectors */
typedef REAL NAME(vec) __attribute__((vector_size(64), aligned(sizeof(REAL))));
#define VEC NAME(vec)
#define LOAD(p) (*(const VEC *)(p))

/* The sum of a vector's lanes, by halves: log2(VL) shuffles and additions. */
static inline REAL NAME(lane_sum)(VEC v) {
#if LANES == 16
    v += __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3);
    v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1);
    v += __builtin_shufflevector(v, v, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0);
#else
    v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
    v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 2, 3, 0, 1);
    v += __builtin_shufflevector(v, v, 1, 0, 1, 0, 1, 0, 1, 0);
#endif
    return v[0];
}

/* out = Kᵀ x for K (T, T), CH columns at a time summed in registers, over strips of ROWS rows
   (a strip is read once from memory for all its column chunks, then from cache). */
#define ROWS 32
static void NAME(column_product)(int T, const REAL *K, const REAL *x, REAL *restrict out) {
    const int whole = T - T % CH;
    for (int j = 0; j < T; j++) out[j] = 0;
    for (int i0 = 0; i0 < T; i0 += ROWS) {
        const int i1 = i0 + ROWS < T ? i0 + ROWS : T;
        for (int j0 = 0; j0 < whole; j0 += CH) {
            VEC sum[8];
#pragma GCC unroll 8
            for (int l = 0; l < 8; l++) sum[l] = LOAD(out + j0 + l * VL);
            for (int i = i0; i < i1; i++) {
                const REAL xi = x[i];
                const REAL *row = K + (i64)i * T + j0;
#pragma GCC unroll 8
                for (int l = 0; l < 8; l++) sum[l] += xi * LOAD(row + l * VL);
            }
#pragma GCC unroll 8
            for (int l = 0; l < 8; l++) *(VEC *)(out + j0 + l * VL) = sum[l];
        }
        for (int i = i0; i < i1; i++)
            for (int j = whole; j < T; j++) out[j] += x[i] * K[(i64)i * T + j];
    }
}
#undef ROWS

/* out = K y for K (T, T): one vector sum a row. */
static void NAME(row_product)(int T, const REAL *K, const REAL *y, REAL *restrict out) {
    const int whole = T - T % VL;
    for (int i = 0; i < T; i++) {
        const REAL *row = K + (i64)i * T;
        VEC sum = {0};
        for (int j = 0; j < whole; j += VL) sum += LOAD(row + j) * LOAD(y + j);
        REAL s = NAME(lane_sum)(sum);
        for (int j = whole; j < T; j++) s += row[j] * y[j];
        out[i] = s;
    }
}

/* A node's projection, in place: its scalings u, v (largest entry 1, 0 for a dead tag) and
   their log shifts su, sv, from its in-product a = K_{n-1}ᵀ v_{n-1} and out-product
   b = K_n u_{n+1}, whose vectors' shifts are shift_in and shift_out. least: the smallest live
   scaling written so far. work: 3 T. */
static void NAME(project)(int T, REAL *u, REAL *v, REAL *su, REAL *sv, const REAL *a, const REAL *b,
                          REAL shift_in, REAL shift_out, REAL *least, REAL *work) {
    REAL *node = work, *new_u = work + T, *new_v = work + 2 * T;
    REAL largest = 0;
#pragma omp simd reduction(max : largest)
    for (int t = 0; t < T; t++) {
        node[t] = SQRT(u[t]) * SQRT(v[t]);
        largest = node[t] > largest ? node[t] : largest;
    }
    REAL norm = 0, largest_u = 0, largest_v = 0;
#pragma omp simd reduction(+ : norm) reduction(max : largest_u, largest_v)
    for (int t = 0; t < T; t++) {
        const REAL ratio = SQRT(b[t] / a[t]), x = node[t] / largest;
        new_u[t] = x * ratio;
        new_v[t] = x / ratio;
        norm += new_u[t] * a[t];
        largest_u = new_u[t] > largest_u ? new_u[t] : largest_u;
        largest_v = new_v[t] > largest_v ? new_v[t] : largest_v;
    }
    REAL smallest = *least;
#pragma omp simd reduction(min : smallest)
    for (int t = 0; t < T; t++) {
        u[t] = new_u[t] / largest_u;
        v[t] = new_v[t] / largest_v;
        const REAL lower = u[t] < v[t] ? u[t] : v[t], live = node[t] > 0 ? lower : (REAL)INFINITY;
        smallest = live < smallest ? live : smallest;
    }
    *least = smallest;
    const REAL log_norm = LOG(norm);
    *su = LOG(largest_u) - log_norm - shift_in;
    *sv = LOG(largest_v) - log_norm - shift_out;
}

/* `iterations` iterations, in place, on the sequences [b0, b1), `depth` at a time in one sweep:
   each iteration projects the inner nodes of parity `first`, then those of the other parity.
   K0, K1: the (T, T) blocks of the even and the odd arcs, block r of sequence b at
   K_p + b kb_p + r kr_p. lin_p (B, 2, P_p, T): the scalings u, v of the nodes of parity p (node
   2r + p in row r); shift_p (B, 2, P_p): their log shifts; least (B): the smallest live scaling
   written. Returns 0, or -1 where no work space could be had.

   Within a sweep, iteration t of the `depth` takes its step at node n = w − 2t of wave w, the
   waves in node order and each wave's steps in the order of t: a step then finds its
   neighbours' scalings of the iteration before (node n + 1's were projected by iteration t − 1's
   step at n + 2, earlier in the same wave) and none of the next (iteration t + 1 reaches node
   n − 1 later in the wave). The 2 depth arc blocks a wave reads stay in cache until its last
   iteration has read them: the sweep reads each from memory once for all `depth`. */
int NAME(ibp_sweep)(i64 b0, i64 b1, int T, const i64 *lengths, int first, int iterations, int depth,
                    const REAL *K0, i64 kb0, i64 kr0, const REAL *K1, i64 kb1, i64 kr1,
                    REAL *lin0, i64 P0, REAL *shift0, REAL *lin1, i64 P1, REAL *shift1, REAL *least) {
    depth = depth < 1 ? 1 : depth;
    REAL *work = malloc((size_t)(6 + depth) * T * sizeof(REAL));
    if (!work) return -1;
    REAL *in_first = work, *out_first = work + T, *out_second = work + 2 * T, *scratch = work + 3 * T;
    REAL *pending = work + 6 * T;  /* per iteration of a sweep: the in-product of its next node */
    const REAL *K[2] = {K0, K1};
    const i64 kb[2] = {kb0, kb1}, kr[2] = {kr0, kr1}, P[2] = {P0, P1};
    REAL *lin[2] = {lin0, lin1}, *shift[2] = {shift0, shift1};
    for (i64 b = b0; b < b1; b++) {
#define U(n) (lin[(n) & 1] + (b * 2 * P[(n) & 1] + ((n) >> 1)) * T)
#define V(n) (U(n) + P[(n) & 1] * T)
#define SU(n) (shift[(n) & 1] + b * 2 * P[(n) & 1] + ((n) >> 1))
#define SV(n) (SU(n) + P[(n) & 1])
#define ARC(j) (K[(j) & 1] + b * kb[(j) & 1] + ((j) >> 1) * kr[(j) & 1])
        const i64 length = lengths[b];
        for (int done = 0; done < iterations; done += depth) {
            const int count = iterations - done < depth ? iterations - done : depth;
            for (i64 wave = first; wave < length + 2 * (count - 1); wave += 2)
                for (int t = 0; t < count && wave - 2 * t >= first; t++) {
                    const i64 n = wave - 2 * t;
                    if (n >= length) continue;
                    REAL *in_second = pending + (i64)t * T;
                    const int has_in = n >= 1, has_out = n <= length - 2;
                    if (has_in) NAME(column_product)(T, ARC(n - 1), V(n - 1), in_first);
                    if (has_out) NAME(row_product)(T, ARC(n), U(n + 1), out_first);
                    if (has_in && has_out)
                        NAME(project)(T, U(n), V(n), SU(n), SV(n), in_first, out_first, *SV(n - 1), *SU(n + 1),
                                      least + b, scratch);
                    if (has_in) {  /* node n - 1: its out-product now, its in-product from the step before */
                        NAME(row_product)(T, ARC(n - 1), U(n), out_second);
                        if (n - 1 >= 1)
                            NAME(project)(T, U(n - 1), V(n - 1), SU(n - 1), SV(n - 1), in_second, out_second,
                                          *SV(n - 2), *SU(n), least + b, scratch);
                    }
                    if (has_out) NAME(column_product)(T, ARC(n), V(n), in_second);  /* into node n + 1 */
                }
        }
#undef U
#undef V
#undef SU
#undef SV
#undef ARC
    }
    free(work);
    return 0;
}

#undef NAME
#undef VL
#undef CH
#undef VEC
#undef LOAD
#endif
