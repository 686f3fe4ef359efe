/* A fused attention kernel on the CPU (internal: the cpu backend of `psearch exec` runs it, jobs/backend_cpu.c, and
 * `psearch calibrate` times it, bench_attn.c, so that the cost database prices the kernel exec runs):
 * softmax(Q K^T / sqrt(d) [+ causal mask]) V over batch x heads, forward and backward, tiled the FlashAttention-2 way
 * (Dao 2023, arXiv 2307.08691): query blocks against key blocks with an online softmax (running row max and sum, the
 * partial output rescaled), the backward recomputing each tile's scores from the saved log-sum-exp. No s x s matrix
 * exists at any time: the working set is a few tiles per thread, taken from a workspace the caller allocates once
 * (ps_attn_cpu_ws_floats), so running it allocates nothing. Tile products go through cblas_sgemm (OpenBLAS held to
 * one thread inside the kernel's OpenMP region). fp32. */
#ifndef PS_ATTN_CPU_H
#define PS_ATTN_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ps_common.h"

/* Row-major, contiguous: Q [batch][heads][sq][d], K [batch][kv_heads][sk][d], V [batch][kv_heads][sk][dv],
 * O and dO [batch][heads][sq][dv], the log-sum-exp [batch][heads][sq]; gradients shaped as their tensors. Query head
 * h reads key/value head h / (heads / kv_heads) (grouped-query attention; kv_heads == heads: ordinary). */
typedef struct {
    int64_t batch, heads, kv_heads;
    int64_t sq, sk;  /* queries and keys per sequence */
    int64_t d, dv;   /* head width of Q and K, of V and O */
    bool causal;     /* query i attends keys 0 .. i only (self-attention, sq == sk) */
    int64_t tile;    /* query and key block rows; 0: PS_ATTN_CPU_TILE */
} ps_attn_cpu_shape;

enum { PS_ATTN_CPU_TILE = 128 };

/* The shape's rules (positive sizes, heads a multiple of kv_heads, sizes BLAS takes), PS_ERR_INPUT naming the one
 * broken. */
ps_status ps_attn_cpu_check(const ps_attn_cpu_shape *a);
/* Workspace floats the forward and the backward need on `threads` OpenMP threads. */
size_t ps_attn_cpu_ws_floats(const ps_attn_cpu_shape *a, int threads);
/* O and the log-sum-exp of every query row (what the backward needs besides Q, K, V, O). */
ps_status ps_attn_cpu_fwd(const ps_attn_cpu_shape *a, const float *q, const float *k, const float *v, float *o,
                          float *lse, float *ws, int threads);
/* dQ, dK, dV (overwritten) from dO, the forward's inputs, O and lse. Parallel over batch x kv_heads: each thread owns
 * a key/value head's dK, dV and its query heads' dQ, so nothing is added across threads. */
ps_status ps_attn_cpu_bwd(const ps_attn_cpu_shape *a, const float *q, const float *k, const float *v, const float *o,
                          const float *lse, const float *dout, float *dq, float *dk, float *dvv, float *ws,
                          int threads);
/* FLOPs the forward executes (two tile products per visited tile, causal tiles above the diagonal skipped at the
 * row level: what ps_layer_attn_keys counts); the backward executes 2.5 times as many. */
double ps_attn_cpu_flops(const ps_attn_cpu_shape *a);

#endif
