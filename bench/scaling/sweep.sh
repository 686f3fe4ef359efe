#!/usr/bin/env bash
# bench/scaling, the sweep case (issue #25): one `psearch sweep` of 20 models x 6 cluster sizes (120 cells) on 1, 2,
# 4 and 8 ranks (oversubscribed on a small machine, as run.sh), printing one JSON document:
#   runs[]: per rank count, the sweep's wall time, every rank's busy time (seconds in its cells' searches), the
#           balance (busy max/mean; target <= 1.10 at 8 ranks), the groups and shared cells psearch chose, and
#           whether the tables are byte-identical to the 1-rank sweep's;
#   predicted[]: the wall time on N real nodes (one rank each), from the per-cell search work measured by the
#           1-rank sweep (cells.jsonl: search.cpu_s, CPU seconds) replayed through the hand-out psearch does (the
#           same split: cells above a group's share on all ranks, at perfect scaling, the others to whichever group
#           is free, largest estimate first), plus the 1-rank sweep's set-up time and rank 0's time recording each
#           cell (take_s / cells: record, timeline, tables, each fsync'ed), in units of this machine's single-thread
#           cell times; search_only_wall_s leaves the set-up and recording out (the hand-out's balance alone).
# Usage: bench/scaling/sweep.sh BUILD_DIR [RANK_COUNTS...]   (default 1 2 4 8; OMP_NUM_THREADS per rank [1])
set -eu
build=${1:?usage: sweep.sh BUILD_DIR [RANK_COUNTS...]}
shift
counts=("$@")
[[ ${#counts[@]} -gt 0 ]] || counts=(1 2 4 8)
ps=$build/cli/psearch
[[ -x $ps ]] || { echo "sweep.sh: $ps not built (cmake --build $build)" >&2; exit 2; }
launcher=$(command -v mpiexec || command -v mpirun) || { echo "sweep.sh: no mpiexec on PATH" >&2; exit 2; }
command -v python3 >/dev/null || { echo "sweep.sh: python3 is needed for the summary" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
export PSEARCH_DATA_DIR="$root/presets"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_mpi_yield_when_idle=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# 20 presets from 1.3 B to 175 B parameters (GPT-3, Llama, BERT, ViT, Swin, T5) on 1 to 32 DGX A100 nodes.
models=bert-huge-32,bert-xhuge,gpt3-1.3b,gpt3-13b,gpt3-15b,gpt3-175b,gpt3-2.7b,gpt3-39b,gpt3-6.7b,gpt3-65b
models+=,llama2-13b,llama2-70b,llama2-7b,llama3-70b,llama3-8b,swin-huge-32,t5-large-32,t5-large-48,vit-huge-32
models+=,vit-xhuge
clusters=dgx-a100-80g:1,2,4,8,16,32

for n in "${counts[@]}"; do
  "$launcher" -n "$n" --bind-to none "$ps" sweep --models "$models" --clusters "$clusters" --format json \
    --out "$scratch/n$n" </dev/null >"$scratch/n$n.json" 2>"$scratch/n$n.err" ||
    { echo "sweep.sh: the sweep on $n ranks failed: $(tail -3 "$scratch/n$n.err")" >&2; exit 1; }
done

python3 - "$scratch" "${counts[@]}" <<'EOF'
import filecmp, json, os, sys

scratch, counts = sys.argv[1], [int(c) for c in sys.argv[2:]]
first = counts[0]

def ratio(v):
    return max(v) / (sum(v) / len(v)) if sum(v) > 0 else 1.0

runs = []
for n in counts:
    s = json.load(open(f"{scratch}/n{n}.json"))
    same = all(filecmp.cmp(f"{scratch}/n{first}/{f}", f"{scratch}/n{n}/{f}", shallow=False)
               for f in ("plans.md", "plans.csv", "index.html"))
    runs.append({"ranks": n, "wall_s": round(s["wall_s"], 3), "setup_s": round(s["setup_s"], 3),
                 "take_s": round(s["take_s"], 3), "busy_s": [round(b, 3) for b in s["busy_s"]],
                 "busy_max_over_mean": round(ratio(s["busy_s"]), 3),
                 "busy_cpu_s": [round(b, 3) for b in s["busy_cpu_s"]],
                 "busy_cpu_max_over_mean": round(ratio(s["busy_cpu_s"]), 3), "groups": s["groups"],
                 "shared_cells": s["shared_cells"], f"tables_identical_to_{first}_rank": same})
    if n == first:
        setup, take = s["setup_s"], s["take_s"] / max(s["searched"], 1)

# The measured cells: search seconds and the estimate psearch ordered by, in the sweep's cell order (models, then
# clusters, as listed), which breaks ties in the hand-out.
recs = [json.loads(line) for line in open(f"{scratch}/n{first}/cells.jsonl")]
mods, clus = [], []
for r in recs:
    if r["model"] not in mods: mods.append(r["model"])
    if r["cluster"] not in clus: clus.append(r["cluster"])
cells = sorted(recs, key=lambda r: (mods.index(r["model"]), clus.index(r["cluster"])))
t = [r["search"]["cpu_s"] for r in cells]  # CPU seconds: the work, without the waits of a shared machine
w = [r["search"]["work_estimate"] for r in cells]
total = sum(t)

def ranks_of(v):
    order = sorted(range(len(v)), key=lambda i: -v[i])
    r = [0] * len(v)
    for pos, i in enumerate(order):
        r[i] = pos
    return r

# How well the estimate orders the cells (Spearman's rank correlation with the measured CPU seconds).
rt, rw = ranks_of(t), ranks_of(w)
m = len(cells)
spearman = 1 - 6 * sum((a - b) ** 2 for a, b in zip(rt, rw)) / (m * (m * m - 1)) if m > 1 else 1.0

def replay(nodes, take):
    """psearch's split (mpi/sweep.c ps_sweep_groups_make, automatic groups) and dynamic hand-out, simulated."""
    g = min(nodes, len(cells))
    order = sorted(range(len(cells)), key=lambda i: (-w[i], i))
    wsum = sum(w)
    shared = [i for i in order if g > 1 and w[i] * g > wsum]
    handed = [i for i in order if i not in shared]
    free_at = [0.0] * g
    busy = [0.0] * g
    for i in handed:  # the next cell goes to the group that asks first: the one free earliest (lowest on ties)
        k = min(range(g), key=lambda j: (free_at[j], j))
        free_at[k] += t[i]
        busy[k] += t[i]
        free_at[0] += take  # rank 0 records every cell (records, tables) between its own work
    tail = sum(t[i] + take for i in shared) / nodes  # every rank together, at perfect scaling
    return setup + max(free_at) + tail, ratio(busy), len(shared)

def predict(nodes):
    wall, balance, shared = replay(nodes, take)
    # the same without rank 0's recording and the set-up: how well the hand-out alone spreads the search work
    search_wall, _, _ = replay(nodes, 0.0)
    search_wall -= setup
    return {"nodes": nodes, "wall_s": round(wall, 3), "ideal_s": round(total / nodes, 3),
            "efficiency": round(total / nodes / wall, 3), "busy_max_over_mean": round(balance, 3),
            "shared_cells": shared, "search_only_wall_s": round(search_wall, 3),
            "search_only_efficiency": round(total / nodes / search_wall, 3),
            "recording_s": round(take * len(cells), 3)}

print(json.dumps({"sweep": {"models": len(mods), "clusters": len(clus), "cells": len(cells),
                            "threads_per_rank": int(os.environ["OMP_NUM_THREADS"]), "cell_search_total_s": round(total, 3),
                            "largest_cell_s": round(max(t), 3), "setup_s": round(setup, 3),
                            "take_s_per_cell": round(take, 4), "estimate_rank_correlation": round(spearman, 3),
                            "runs": runs,
                            "predicted": [predict(n) for n in (1, 2, 4, 8, 16)]}}, indent=1))
EOF
