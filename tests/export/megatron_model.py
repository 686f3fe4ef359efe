"""The model a Megatron-LM launch builds, read from its flags with Megatron's own defaults (tests only; stdlib).

fwlib.megatron_read reads the shape (layers, widths, heads); this reads the rest of the architecture, so that a model
flag the export drops (or gets wrong) shows as another model, not as the same one under Megatron's defaults:
positions, rotary base, normalization, activation, biases, tied output layer, dropout. The defaults are Megatron-LM's
at NVIDIA/Megatron-LM d98e8a64ddf3 (the commit of tests/data/export/megatron_flags.json):
  - megatron/training/arguments.py: --position-embedding-type learned_absolute, --rotary-base 10000 (int),
    --rotary-percent 1.0, --swiglu / --squared-relu store_true (GeLU otherwise), --untie-embeddings-and-output-weights
    store_true (tied otherwise), --ffn-hidden-size None -> 4h, or int((4h * 2/3) / 64) * 64 with --swiglu,
    --kv-channels None -> hidden / heads; --use-rotary-position-embeddings (legacy) sets rope;
  - megatron/core/transformer/transformer_config.py: normalization "LayerNorm", add_bias_linear True (the flag is
    --disable-bias-linear), hidden_dropout 0.1, attention_dropout 0.1, num_query_groups argparse default 1;
  - megatron/training/argument_utils.py core_transformer_config_from_args: num_query_groups only with
    --group-query-attention (None = one group per head otherwise).
The model's side is psearch's model JSON (docs/models.md: a group's value, else the top level's, else the default).
"""
import json

# the flags whose absence would build another Llama 3 (each has a non-default value there): what a dropped-flag test
# removes one at a time
LLAMA3_MODEL_FLAGS = ["--position-embedding-type", "--rotary-base", "--normalization", "--swiglu",
                      "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--group-query-attention",
                      "--num-query-groups", "--ffn-hidden-size", "--hidden-dropout", "--attention-dropout"]


def megatron_arch(a):
    """The architecture the flags `a` ({flag: value or True}, fwlib.megatron_args) build."""
    hidden, heads = int(a["--hidden-size"]), int(a["--num-attention-heads"])
    swiglu = "--swiglu" in a
    pos = a.get("--position-embedding-type", "learned_absolute")
    if "--use-rotary-position-embeddings" in a:
        pos = "rope"
    drop = {float(a.get("--hidden-dropout", 0.1)) > 0, float(a.get("--attention-dropout", 0.1)) > 0}
    out = {
        "layers": int(a["--num-layers"]), "hidden": hidden, "heads": heads,
        "kv_heads": int(a.get("--num-query-groups", 1)) if "--group-query-attention" in a else heads,
        "head_dim": int(a["--kv-channels"]) if "--kv-channels" in a else hidden // heads,
        "ffn_hidden": int(a["--ffn-hidden-size"]) if "--ffn-hidden-size" in a else
        (int((4 * hidden * 2 / 3) / 64) * 64 if swiglu else 4 * hidden),
        "seq": int(a["--seq-length"]),
        "positions": int(a["--max-position-embeddings"]) if pos == "learned_absolute" else pos,
        "rope_theta": int(a.get("--rotary-base", 10000)) if pos == "rope" else None,
        "rotary_percent": float(a.get("--rotary-percent", 1.0)) if pos == "rope" else None,
        "norm": a.get("--normalization", "LayerNorm").lower(),
        "act": "swiglu" if swiglu else "squared_relu" if "--squared-relu" in a else "gelu",
        "bias": "--disable-bias-linear" not in a,
        "tied": "--untie-embeddings-and-output-weights" not in a,
        "dropout": drop.pop() if len(drop) == 1 else "hidden and attention dropout differ",
    }
    return out


def _groups(model):
    """The model JSON's embedding, first decoder and head groups, each with the top-level fields under its own."""
    top = {k: v for k, v in model.items() if k != "layers"}
    g = {}
    for grp in model["layers"]:
        if grp["kind"] not in g:
            g[grp["kind"]] = dict(top, **grp)
    return g


def model_arch(model):
    """The same architecture from psearch's model JSON (defaults of docs/models.md)."""
    g = _groups(model)
    d, emb, head = g["decoder"], g["embedding"], g["lm_head"]
    heads = d["heads"] if "heads" in d else d["hidden"] // d["head_dim"]
    positions = emb.get("positions", 0)
    return {
        "layers": sum(grp.get("repeat", 1) for grp in model["layers"] if grp["kind"] == "decoder"),
        "hidden": d["hidden"], "heads": heads, "kv_heads": d.get("kv_heads", heads),
        "head_dim": d.get("head_dim", d["hidden"] // heads), "ffn_hidden": d.get("ffn_hidden", 4 * d["hidden"]),
        "seq": d["seq"],
        # psearch: no learned positions = rotary (Megatron prices rotary as free, as psearch does)
        "positions": max(positions, d["seq"]) if positions else "rope",
        "rope_theta": int(model.get("rope_theta", 10000)) if not positions else None,
        "rotary_percent": 1.0 if not positions else None,
        "norm": d.get("norm", "layernorm"), "act": d.get("act", "gelu"), "bias": d.get("bias", True),
        "tied": head.get("tied", False), "dropout": d.get("dropout", False),
    }


def arch_errors(a, model):
    """What the flags build differently from the model (empty: the same model)."""
    got, want = megatron_arch(a), model_arch(model)
    return [f"{k}: the flags build {got[k]!r}, the model has {want[k]!r}" for k in want if got[k] != want[k]]


def model_json(a, vocab, name):
    """A psearch model JSON of exactly what the flags build (the tokenizer's vocabulary is the run's own, not a
    flag: `vocab`), for estimating the read-back plan on the model the launch builds, not on the preset."""
    arch = megatron_arch(a)
    layer = {k: arch[k] for k in ("hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "seq", "norm", "act",
                                  "bias", "dropout")}
    out = {"name": name, "seq": arch["seq"], "vocab": vocab, **layer,
           "layers": [{"kind": "embedding"}, {"kind": "decoder", "repeat": arch["layers"]},
                      {"kind": "lm_head", "tied": arch["tied"]}]}
    if isinstance(arch["positions"], int):
        out["positions"] = arch["positions"]
    if arch["rope_theta"]:
        out["rope_theta"] = arch["rope_theta"]
    return out


def load_model(path):
    with open(path) as f:
        return json.load(f)
