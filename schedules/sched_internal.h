/* Internal face of schedules/: the workspace layout shared by the kind table, the generators and the simulator. */
#ifndef PS_SCHED_INTERNAL_H
#define PS_SCHED_INTERNAL_H

#include "ps_schedules.h"

/* One pass in an execution order that respects every dependency (recorded by the verification run), so a
 * simulation is one linear scan: padded flat pass index (into endp), device, (micro-batch, stage) index,
 * stage << 2 | op. */
typedef struct {
    int32_t k, dev, idx;
    uint32_t st_op;
} ps_sched_step_;

struct ps_sched_v_offsets; /* gen.c */

typedef struct ps_sched_kind_def {
    const char *name;
    const char *description;
    int default_chunks, min_chunks, max_chunks;
    ps_sched_placement place;
    ps_sched_n_rule n_rule;
    const struct ps_sched_v_offsets *v; /* V-shape kinds: the building block's offsets; NULL for the others */
    /* Append the passes of device dev with ps_sched_emit_; the workspace already holds room for all of them. */
    void (*gen_device)(ps_sched *s, int dev);
    /* Instead of gen_device, for kinds whose order comes from a joint list schedule of all devices (ZB-H2): fill
     * pass[] device by device (device i owns [i*per, (i+1)*per) with per = passes per device), set dev_off and
     * npass. May use end_f / end_b / scratch as scratch: verification re-initialises them. */
    void (*gen_all)(ps_sched *s);
    /* The generator's work, where it grows faster than the passes (V-ZB's greedy reordering looks up to 12d passes
     * ahead on every device at every step: about d^2 n), and its cap; 0: the pass cap alone bounds the work. */
    double (*gen_work)(int d, int n);
    double max_gen_work;
} ps_sched_kind_def;

struct ps_sched {
    const ps_sched_kind_def *kind; /* NULL for an order installed with set_order */
    int d, n, v, stages;
    bool verified; /* the order passed verify() and its dependency record (prog) is made: it may be simulated */

    ps_sched_pass *pass; /* flat, device by device */
    ps_sched_pass *tmp;  /* [pass_cap] generator scratch (V-ZB keeps the building-block order here) */
    size_t pass_cap;
    int64_t npass;
    int64_t *dev_off; /* [d+1] */
    int *dev_stage;   /* [d*v]: stage of (device, chunk) */
    int *stage_dev;   /* [stages] */
    int *cursor, *queue; /* [d] simulation cursors and the queue of devices to advance */
    uint8_t *queued;     /* [d] */
    size_t dev_cap, stage_cap;

    /* per (micro-batch, stage), micro-batch major: end times (the verification run: -1 until done); also the
     * verification bitmap. (Stage major was measured slower: device rows n*8 bytes apart alias in the cache.) */
    double *end_f, *end_b, *end_w;
    size_t sm_cap;

    ps_sched_step_ *prog; /* [npass] the passes in dependency order, recorded by verification */
    double *stc;         /* [11 * stage_cap] per-stage durations and latencies prepared once per simulate */
    int64_t *scratch;    /* [8 * dev_cap] generator scratch (per-device counters) */
    double *start, *end; /* [npass] */
    double *endp;        /* [npass + PAD * (d+1)] end times, device regions padded apart (sched.c, PS_SCHED_PAD) */
    double *busy, *idle, *peak; /* [d] */
    size_t res_pass_cap;
};

/* Append one pass at the end of the flat list (capacity is reserved before a generator runs). */
static inline void ps_sched_emit_(ps_sched *s, ps_sched_op op, int mb, int chunk)
{
    ps_sched_pass *p = &s->pass[s->npass++];
    p->mb = mb;
    p->chunk = (uint16_t)chunk;
    p->op = (uint8_t)op;
    p->reserved_ = 0;
}

extern const ps_sched_kind_def ps_sched_kinds_[];
extern const int ps_sched_nkinds_;

#endif
