/* The fused attention kernel of the cpu backend (declared in ps_calib.h): FlashAttention-2 loop order, BLAS tiles. */
#include <math.h>
#include <string.h>

#include <cblas.h>
#include <omp.h>

#include "ps_calib.h"

static int64_t tile_of(const ps_attn_cpu_shape *a) { return a->tile > 0 ? a->tile : PS_ATTN_CPU_TILE; }

ps_status ps_attn_cpu_check(const ps_attn_cpu_shape *a)
{
    PS_CHECK_INPUT(a->batch > 0 && a->heads > 0 && a->kv_heads > 0 && a->sq > 0 && a->sk > 0 && a->d > 0 && a->dv > 0,
                   "fused attention: every size must be positive (batch %lld, heads %lld/%lld, s %lld/%lld, "
                   "d %lld/%lld)",
                   (long long)a->batch, (long long)a->heads, (long long)a->kv_heads, (long long)a->sq,
                   (long long)a->sk, (long long)a->d, (long long)a->dv);
    PS_CHECK_INPUT(a->heads % a->kv_heads == 0, "fused attention: %lld query heads are not a multiple of %lld kv heads",
                   (long long)a->heads, (long long)a->kv_heads);
    PS_CHECK_INPUT(a->d <= INT32_MAX && a->dv <= INT32_MAX && tile_of(a) <= 1 << 16,
                   "fused attention: head width %lld/%lld or tile %lld too large for BLAS", (long long)a->d,
                   (long long)a->dv, (long long)tile_of(a));
    return PS_OK;
}

/* Per thread: two tiles (scores / probabilities and their gradient), the output accumulator of one query block, the
 * running max and sum of its rows, and the backward's rowsum(dO o O) of one head. */
static size_t ws_per_thread(const ps_attn_cpu_shape *a)
{
    size_t t = (size_t)tile_of(a);
    return 2 * t * t + t * (size_t)a->dv + 2 * t + (size_t)a->sq + 16;
}

size_t ps_attn_cpu_ws_floats(const ps_attn_cpu_shape *a, int threads)
{
    return ws_per_thread(a) * (size_t)(threads > 0 ? threads : 1);
}

/* Keys query row r attends: all, or 0 .. r under the causal mask. */
static int64_t keys_of(const ps_attn_cpu_shape *a, int64_t r)
{
    return a->causal ? (r + 1 < a->sk ? r + 1 : a->sk) : a->sk;
}

double ps_attn_cpu_flops(const ps_attn_cpu_shape *a)
{
    double keys = 0;
    for (int64_t r = 0; r < a->sq; r++) keys += (double)keys_of(a, r);
    return 2.0 * (double)a->batch * (double)a->heads * keys * (double)(a->d + a->dv);
}

/* OpenBLAS keeps its own thread pool: inside the kernel's OpenMP region each thread's tile products run on that
 * thread alone (nested pools would oversubscribe the cores); the caller's setting is restored after. */
static int blas_single(int threads)
{
    int was = openblas_get_num_threads();
    if (threads > 1) openblas_set_num_threads(1);
    return was;
}

static void blas_restore(int threads, int was)
{
    if (threads > 1) openblas_set_num_threads(was);
}

/* One query block [r0, r1) of one head: every key block it sees (causal: up to its last row), the online softmax. */
static void fwd_block(const ps_attn_cpu_shape *a, int64_t t, float scale, const float *q, const float *k,
                      const float *v, float *o, float *lse, int64_t r0, int64_t r1, float *w)
{
    int64_t nr = r1 - r0, d = a->d, dv = a->dv;
    float *s = w, *acc = w + 2 * t * t, *mx = acc + t * dv, *sum = mx + t;
    for (int64_t r = 0; r < nr; r++) {
        mx[r] = -INFINITY;
        sum[r] = 0;
    }
    memset(acc, 0, (size_t)(nr * dv) * sizeof *acc);
    int64_t kend = keys_of(a, r1 - 1);
    for (int64_t c0 = 0; c0 < kend; c0 += t) {
        int64_t c1 = c0 + t < kend ? c0 + t : kend, nc = c1 - c0;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)nc, (int)d, scale, q + r0 * d, (int)d,
                    k + c0 * d, (int)d, 0.0f, s, (int)t);
        for (int64_t r = 0; r < nr; r++) {
            float *row = s + r * t;
            int64_t lim = keys_of(a, r0 + r) - c0; /* keys of this block the row sees */
            if (lim > nc) lim = nc;
            float m = mx[r];
            for (int64_t c = 0; c < lim; c++) m = row[c] > m ? row[c] : m;
            /* the running max grew: what was summed and accumulated against the old one shrinks by exp(old - new) */
            float alpha = m == -INFINITY ? 1.0f : expf(mx[r] - m), l = 0;
            for (int64_t c = 0; c < nc; c++) {
                float p = c < lim ? expf(row[c] - m) : 0.0f;
                row[c] = p;
                l += p;
            }
            sum[r] = alpha * sum[r] + l;
            mx[r] = m;
            if (alpha != 1.0f)
                for (int64_t j = 0; j < dv; j++) acc[r * dv + j] *= alpha;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, (int)dv, (int)nc, 1.0f, s, (int)t,
                    v + c0 * dv, (int)dv, 1.0f, acc, (int)dv);
    }
    for (int64_t r = 0; r < nr; r++) {
        /* a row that sees no key (none here: causal rows see key 0) gets O = 0 and lse = +inf, so P = 0 backward */
        float inv = sum[r] > 0 ? 1.0f / sum[r] : 0.0f;
        for (int64_t j = 0; j < dv; j++) o[(r0 + r) * dv + j] = acc[r * dv + j] * inv;
        lse[r0 + r] = sum[r] > 0 ? mx[r] + logf(sum[r]) : INFINITY;
    }
}

ps_status ps_attn_cpu_fwd(const ps_attn_cpu_shape *a, const float *q, const float *k, const float *v, float *o,
                          float *lse, float *ws, int threads)
{
    PS_TRY(ps_attn_cpu_check(a));
    if (threads < 1) threads = 1;
    int64_t t = tile_of(a), nqb = (a->sq + t - 1) / t, g = a->heads / a->kv_heads;
    int64_t tasks = a->batch * a->heads * nqb;
    float scale = 1.0f / sqrtf((float)a->d);
    size_t per = ws_per_thread(a);
    int was = blas_single(threads);
    /* causal query blocks differ in work (the last sees every key): dynamic hand-out */
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; task++) {
        int64_t bh = task / nqb, qb = task % nqb, b = bh / a->heads, h = bh % a->heads;
        int64_t kvh = b * a->kv_heads + h / g;
        int64_t r0 = qb * t, r1 = r0 + t < a->sq ? r0 + t : a->sq;
        fwd_block(a, t, scale, q + bh * a->sq * a->d, k + kvh * a->sk * a->d, v + kvh * a->sk * a->dv,
                  o + bh * a->sq * a->dv, lse + bh * a->sq, r0, r1, ws + (size_t)omp_get_thread_num() * per);
    }
    blas_restore(threads, was);
    return PS_OK;
}

/* One query head of a kv head: for each key block (its dK, dV rows stay hot), every query block that sees it;
 * P recomputed from the scores and the saved lse, then dV += P^T dO, dP = dO V^T, dS = P o (dP - D),
 * dQ += dS K / sqrt(d), dK += dS^T Q / sqrt(d). */
static void bwd_head(const ps_attn_cpu_shape *a, int64_t t, float scale, const float *q, const float *k,
                     const float *v, const float *o, const float *lse, const float *dout, float *dq, float *dk,
                     float *dvv, float *w)
{
    int64_t d = a->d, dv = a->dv;
    float *p = w, *dp = w + t * t, *dd = w + 2 * t * t + t * dv + 2 * t;
    for (int64_t r = 0; r < a->sq; r++) {
        double x = 0;
        for (int64_t j = 0; j < dv; j++) x += (double)dout[r * dv + j] * o[r * dv + j];
        dd[r] = (float)x;
    }
    for (int64_t c0 = 0; c0 < a->sk; c0 += t) {
        int64_t c1 = c0 + t < a->sk ? c0 + t : a->sk, nc = c1 - c0;
        /* causal: the first query row that sees key c0 is row c0 */
        int64_t q0 = a->causal ? c0 / t * t : 0;
        for (int64_t r0 = q0; r0 < a->sq; r0 += t) {
            int64_t r1 = r0 + t < a->sq ? r0 + t : a->sq, nr = r1 - r0;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)nc, (int)d, scale, q + r0 * d, (int)d,
                        k + c0 * d, (int)d, 0.0f, p, (int)t);
            for (int64_t r = 0; r < nr; r++) {
                int64_t lim = keys_of(a, r0 + r) - c0;
                float l = lse[r0 + r], *row = p + r * t;
                for (int64_t c = 0; c < nc; c++) row[c] = c < lim ? expf(row[c] - l) : 0.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nc, (int)dv, (int)nr, 1.0f, p, (int)t,
                        dout + r0 * dv, (int)dv, 1.0f, dvv + c0 * dv, (int)dv);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)nc, (int)dv, 1.0f, dout + r0 * dv,
                        (int)dv, v + c0 * dv, (int)dv, 0.0f, dp, (int)t);
            for (int64_t r = 0; r < nr; r++)
                for (int64_t c = 0; c < nc; c++) dp[r * t + c] = p[r * t + c] * (dp[r * t + c] - dd[r0 + r]);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, (int)d, (int)nc, scale, dp, (int)t,
                        k + c0 * d, (int)d, 1.0f, dq + r0 * d, (int)d);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nc, (int)d, (int)nr, scale, dp, (int)t,
                        q + r0 * d, (int)d, 1.0f, dk + c0 * d, (int)d);
        }
    }
}

ps_status ps_attn_cpu_bwd(const ps_attn_cpu_shape *a, const float *q, const float *k, const float *v, const float *o,
                          const float *lse, const float *dout, float *dq, float *dk, float *dvv, float *ws,
                          int threads)
{
    PS_TRY(ps_attn_cpu_check(a));
    if (threads < 1) threads = 1;
    int64_t t = tile_of(a), g = a->heads / a->kv_heads, tasks = a->batch * a->kv_heads;
    float scale = 1.0f / sqrtf((float)a->d);
    size_t per = ws_per_thread(a);
    int was = blas_single(threads);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t kvh = 0; kvh < tasks; kvh++) {
        float *w = ws + (size_t)omp_get_thread_num() * per;
        size_t nk = (size_t)(a->sk * a->d), nv = (size_t)(a->sk * a->dv), nq = (size_t)(a->sq * a->d);
        memset(dk + kvh * a->sk * a->d, 0, nk * sizeof *dk);
        memset(dvv + kvh * a->sk * a->dv, 0, nv * sizeof *dvv);
        for (int64_t j = 0; j < g; j++) {
            int64_t bh = kvh * g + j; /* batch-major, heads of one kv head consecutive: (b, h) = (kvh / kv, ...) */
            memset(dq + bh * a->sq * a->d, 0, nq * sizeof *dq);
            bwd_head(a, t, scale, q + bh * a->sq * a->d, k + kvh * a->sk * a->d, v + kvh * a->sk * a->dv,
                     o + bh * a->sq * a->dv, lse + bh * a->sq, dout + bh * a->sq * a->dv, dq + bh * a->sq * a->d,
                     dk + kvh * a->sk * a->d, dvv + kvh * a->sk * a->dv, w);
        }
    }
    blas_restore(threads, was);
    return PS_OK;
}
