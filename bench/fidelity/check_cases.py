#!/usr/bin/env python3
"""Schema check of the fidelity data sets (docs/fidelity.md): bench/fidelity/cases.json and cases-modern.json.

Usage: check_cases.py [FILE ...]   (default: both files, paths from the repository root)

Checks every case: required fields and their types, unique ids, micro_batches = gbs / (mbs x dp) exactly,
tp x pp x dp x cp = the cluster's GPU count where the cluster is a preset (`name:nodes`, nodes x gpus_per_node of
presets/clusters/name.json) or a cluster.json path (sum of nodes x gpus_per_node), the model is a preset or an
existing file, ep x etp divides tp x cp x dp (Megatron-core's expert grid) and ep > 1 comes with plan.moe whose
experts it divides, and in cases-modern.json the `set` and `needs` fields. Prints one line per problem naming the case and
the field, and exits 1 if there is any. Python 3 standard library only; predicts nothing.
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT = ["bench/fidelity/cases.json", "bench/fidelity/cases-modern.json"]
METRICS = {"iter_time_s", "samples_per_s", "tokens_per_s", "mfu", "tflops_per_gpu"}
CONFIDENCE = {"high", "medium", "low"}
RECOMPUTE = {"none", "selective", "full", "op"}  # op: torchtitan per-op selective checkpointing
DTYPES = {"bf16", "fp16", "fp32", "fp8"}
ATTENTION = {"fused", "unfused"}
SETS = {"train", "validation"}
NEEDS = {"cp", "ep", "moe", "fp8", "fused_attention", "overlap", "gb200-nvl72", "activation_offload",
         "recompute_modules"}  # recompute_modules: Megatron's per-module selective recomputation (mla_up_proj, mlp, ...)
CP_COMM = {"ring", "a2a", "allgather"}  # psearch's ps_cp_comm names (Megatron's --cp-comm-type p2p = ring)
# Presets another branch is adding: a case may name them before they exist (the GPU count is then not checked).
PENDING_CLUSTERS = {"gb200-nvl72"}


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return (isinstance(v, (int, float))) and not isinstance(v, bool)


class Checker:
    def __init__(self):
        self.errors = []
        self.warnings = []

    def err(self, where, cid, field, msg):
        self.errors.append("%s: case %s: field '%s': %s" % (where, cid, field, msg))

    def warn(self, where, cid, field, msg):
        self.warnings.append("%s: case %s: field '%s': %s" % (where, cid, field, msg))

    def cluster_gpus(self, where, cid, spec):
        """GPU count of a cluster spec, or None (after reporting why) when it cannot be counted."""
        if ":" in spec and not spec.endswith(".json"):
            name, _, nodes = spec.partition(":")
            if not nodes.isdigit() or int(nodes) < 1:
                self.err(where, cid, "cluster", "'%s': nodes after ':' must be an integer >= 1" % spec)
                return None
            path = os.path.join(ROOT, "presets", "clusters", name + ".json")
            if not os.path.exists(path):
                if name in PENDING_CLUSTERS:
                    self.warn(where, cid, "cluster", "preset '%s' does not exist yet; GPU count not checked" % name)
                else:
                    self.err(where, cid, "cluster", "no preset presets/clusters/%s.json" % name)
                return None
            with open(path) as f:
                groups = json.load(f).get("node_groups", [])
            if len(groups) != 1 or not is_int(groups[0].get("gpus_per_node")):
                self.err(where, cid, "cluster", "preset %s must have one node group with gpus_per_node" % name)
                return None
            return int(nodes) * groups[0]["gpus_per_node"]
        path = os.path.join(ROOT, spec)
        if not os.path.exists(path):
            self.err(where, cid, "cluster", "'%s' is neither 'preset:nodes' nor an existing cluster.json" % spec)
            return None
        with open(path) as f:
            groups = json.load(f).get("node_groups", [])
        total = 0
        for g in groups:
            if not is_int(g.get("gpus_per_node")) or not is_int(g.get("nodes", 1)):
                self.err(where, cid, "cluster", "%s: node group without integer gpus_per_node/nodes" % spec)
                return None
            total += g.get("nodes", 1) * g["gpus_per_node"]
        return total

    def check_case(self, where, c, modern):
        cid = c.get("id", "?") if isinstance(c, dict) else "?"
        if not isinstance(c, dict):
            self.err(where, cid, "(case)", "must be an object")
            return
        for k in ("id", "source", "model", "cluster", "notes"):
            if not isinstance(c.get(k), str) or not c.get(k).strip():
                self.err(where, cid, k, "required non-empty string")
        for k in ("plan", "published"):
            if not isinstance(c.get(k), dict):
                self.err(where, cid, k, "required object")
                return
        if c.get("confidence") not in CONFIDENCE:
            self.err(where, cid, "confidence", "must be one of %s (got %r)" % (sorted(CONFIDENCE), c.get("confidence")))
        # model: preset name or file
        m = c.get("model")
        if isinstance(m, str) and m:
            if m.endswith(".json"):
                if not os.path.exists(os.path.join(ROOT, m)):
                    self.err(where, cid, "model", "file %s does not exist" % m)
            elif not os.path.exists(os.path.join(ROOT, "presets", "models", m + ".json")):
                self.err(where, cid, "model", "no preset presets/models/%s.json" % m)
        # published
        pub = c["published"]
        if pub.get("metric") not in METRICS:
            self.err(where, cid, "published.metric", "must be one of %s (got %r)" % (sorted(METRICS), pub.get("metric")))
        if not is_num(pub.get("value")) or pub.get("value") <= 0:
            self.err(where, cid, "published.value", "must be a number > 0 (got %r)" % pub.get("value"))
        if not isinstance(pub.get("verbatim"), str) or not pub.get("verbatim"):
            self.err(where, cid, "published.verbatim", "required non-empty string")
        if pub.get("metric") == "mfu" and is_num(pub.get("value")) and pub["value"] >= 1:
            self.err(where, cid, "published.value", "mfu is a fraction (< 1)")
        # plan
        p = c["plan"]
        ok = True
        for k in ("gbs", "mbs", "tp", "pp", "dp", "vpp", "micro_batches"):
            if not is_int(p.get(k)) or p.get(k) < 1:
                self.err(where, cid, "plan." + k, "required integer >= 1 (got %r)" % p.get(k))
                ok = False
        if not isinstance(p.get("schedule"), str) or not p.get("schedule"):
            self.err(where, cid, "plan.schedule", "required string")
        if not is_int(p.get("zero")) or not 0 <= p.get("zero") <= 3:
            self.err(where, cid, "plan.zero", "required integer 0-3 (got %r)" % p.get("zero"))
        if p.get("recompute") not in RECOMPUTE:
            self.err(where, cid, "plan.recompute", "must be one of %s (got %r)" % (sorted(RECOMPUTE), p.get("recompute")))
        # Megatron-LM's --recompute-method block: the first n transformer layers of every model chunk
        rnl = p.get("recompute_num_layers")
        if rnl is not None and (not isinstance(rnl, int) or isinstance(rnl, bool) or rnl < 1
                                or p.get("recompute") != "full"):
            self.err(where, cid, "plan.recompute_num_layers", "must be an integer >= 1 with recompute full (got %r)"
                     % (rnl,))
        if not isinstance(p.get("seq_parallel"), bool):
            self.err(where, cid, "plan.seq_parallel", "required boolean")
        for k in ("cp", "ep", "etp", "seq"):
            if k in p and (not is_int(p[k]) or p[k] < 1):
                self.err(where, cid, "plan." + k, "integer >= 1 (got %r)" % p[k])
                ok = False
        if "cp_comm" in p and p["cp_comm"] not in CP_COMM:
            self.err(where, cid, "plan.cp_comm", "must be one of %s (got %r)" % (sorted(CP_COMM), p["cp_comm"]))
        if "dtype" in p and p["dtype"] not in DTYPES:
            self.err(where, cid, "plan.dtype", "must be one of %s (got %r)" % (sorted(DTYPES), p["dtype"]))
        if "attention" in p and p["attention"] not in ATTENTION:
            self.err(where, cid, "plan.attention", "must be one of %s (got %r)" % (sorted(ATTENTION), p["attention"]))
        if "attention_kernel" in p and p["attention_kernel"] != "fa2":
            self.err(where, cid, "plan.attention_kernel", "must be 'fa2' (got %r)" % p["attention_kernel"])
        for k in ("overlap_grad_reduce", "overlap_param_gather", "tp_comm_overlap", "flash_attention",
                  "grad_reduce_in_fp32"):
            if k in p and not isinstance(p[k], bool):
                self.err(where, cid, "plan." + k, "boolean (got %r)" % p[k])
        if "dp_bucket_size" in p and not (is_int(p["dp_bucket_size"]) and 1000 <= p["dp_bucket_size"] <= 10**11):
            self.err(where, cid, "plan.dp_bucket_size", "integer number of parameters in [1000, 1e11] (got %r)"
                     % p["dp_bucket_size"])
        if "moe" in p:
            moe = p["moe"]
            if (not isinstance(moe, dict) or not is_int(moe.get("experts")) or not is_int(moe.get("top_k"))
                    or not 1 <= moe["top_k"] <= moe["experts"]):
                self.err(where, cid, "plan.moe", "must be {experts: E, top_k: k} with 1 <= k <= E (got %r)" % moe)
        if not ok:
            return
        if p["gbs"] % (p["mbs"] * p["dp"]) != 0:
            self.err(where, cid, "plan.micro_batches", "gbs %d is not a multiple of mbs x dp = %d"
                     % (p["gbs"], p["mbs"] * p["dp"]))
        elif p["micro_batches"] != p["gbs"] // (p["mbs"] * p["dp"]):
            self.err(where, cid, "plan.micro_batches", "%d != gbs / (mbs x dp) = %d"
                     % (p["micro_batches"], p["gbs"] // (p["mbs"] * p["dp"])))
        # Megatron-core's expert groups: ep x etp ranks tile the tp x cp x dp ranks of a stage (etp absent = tp)
        ep, etp = p.get("ep", 1), p.get("etp", p["tp"])
        if is_int(ep) and is_int(etp) and ep >= 1 and etp >= 1:
            width = p["tp"] * p.get("cp", 1) * p["dp"]
            if width % (ep * etp) != 0:
                self.err(where, cid, "plan.ep", "ep x etp = %d x %d does not divide tp x cp x dp = %d" % (ep, etp, width))
            if ep > 1 and "moe" not in p:
                self.err(where, cid, "plan.ep", "ep %d > 1 needs plan.moe (the experts it splits)" % ep)
            if isinstance(p.get("moe"), dict) and is_int(p["moe"].get("experts")) and p["moe"]["experts"] % ep != 0:
                self.err(where, cid, "plan.ep", "ep %d does not divide %d experts" % (ep, p["moe"]["experts"]))
        if isinstance(c.get("cluster"), str) and c["cluster"]:
            gpus = self.cluster_gpus(where, cid, c["cluster"])
            width = p["tp"] * p["pp"] * p["dp"] * p.get("cp", 1)
            if gpus is not None and width != gpus:
                self.err(where, cid, "plan", "tp x pp x dp x cp = %d x %d x %d x %d = %d, but cluster %s has %d GPUs"
                         % (p["tp"], p["pp"], p["dp"], p.get("cp", 1), width, c["cluster"], gpus))
        if modern:
            if c.get("set") not in SETS:
                self.err(where, cid, "set", "must be one of %s (got %r)" % (sorted(SETS), c.get("set")))
            needs = c.get("needs")
            if not isinstance(needs, list) or any(n not in NEEDS for n in needs):
                self.err(where, cid, "needs", "must be a list of %s (got %r)" % (sorted(NEEDS), needs))
            for k in ("seq", "dtype"):
                if k not in p:
                    self.err(where, cid, "plan." + k, "required in the modern data set")

    def check_file(self, path):
        where = path
        full = path if os.path.isabs(path) else os.path.join(ROOT, path)
        modern = os.path.basename(full) == "cases-modern.json"
        try:
            with open(full) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            self.errors.append("%s: cannot read: %s" % (where, e))
            return 0
        if not isinstance(doc, dict) or not is_int(doc.get("schema")) or not isinstance(doc.get("cases"), list):
            self.errors.append("%s: top level must be {\"schema\": int, \"cases\": [...]}" % where)
            return 0
        seen = set()
        for c in doc["cases"]:
            cid = c.get("id") if isinstance(c, dict) else None
            if cid in seen:
                self.err(where, cid, "id", "duplicate id")
            seen.add(cid)
            self.check_case(where, c, modern)
        if modern:
            sets = [c.get("set") for c in doc["cases"] if isinstance(c, dict)]
            if sets and 3 * sets.count("validation") < len(sets):
                self.errors.append("%s: fewer than a third of the cases are in the validation set (%d of %d)"
                                   % (where, sets.count("validation"), len(sets)))
        return len(doc["cases"])


def main(argv):
    files = argv[1:] or DEFAULT
    ck = Checker()
    counts = [(f, ck.check_file(f)) for f in files]
    for w in ck.warnings:
        print("warning: " + w)
    for e in ck.errors:
        print("error: " + e)
    summary = ", ".join("%s: %d cases" % (f, n) for f, n in counts)
    if ck.errors:
        print("check_cases: %d error(s) (%s)" % (len(ck.errors), summary))
        return 1
    print("check_cases: OK (%s)" % summary)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
