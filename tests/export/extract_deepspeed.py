#!/usr/bin/env python3
"""Extract the DeepSpeed config keys the exports may use, from DeepSpeed's source, without importing it.

- top-level keys: the string values of the key constants in deepspeed/runtime/constants.py (the names without a
  _DEFAULT / _FORMAT suffix), plus the sections defined elsewhere: zero_optimization (runtime/zero/config.py
  ZERO_OPTIMIZATION), activation_checkpointing (runtime/activation_checkpointing/config.py ACT_CHKPT), pipeline
  (runtime/config.py get_pipeline_config) and tensor_parallel (runtime/tensor_parallel/init_utils.py). DeepSpeed reads
  the top level with dict lookups, so this list is what it understands; other keys are ignored.
- zero_optimization, bf16, fp16, tensor_parallel: the fields and aliases of their pydantic models
  (DeepSpeedConfigModel: extra="forbid", populate_by_name=True: a key outside them is refused at start-up).
- activation_checkpointing: the ACT_CHKPT_* key constants; pipeline: get_pipeline_config's defaults.

usage: extract_deepspeed.py GIT_DIR [COMMIT] > tests/data/export/deepspeed_keys.json
"""
import ast
import json
import subprocess
import sys


def show(git_dir, commit, path):
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def consts(src):
    out = {}
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            v = node.value
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                out[node.targets[0].id] = v.value
    return out


def model_fields(src, cls):
    """Field names and aliases of a pydantic model class (its own body)."""
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            keys = []
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    keys.append(st.target.id)
                    v = st.value
                    if isinstance(v, ast.Call):
                        for k in v.keywords:
                            if k.arg == "alias" and isinstance(k.value, ast.Constant):
                                keys.append(k.value.value)
            return sorted(set(keys))
    raise SystemExit(f"class {cls} not found")


def main():
    git_dir = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    full = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", commit], check=True, capture_output=True,
                          text=True).stdout.strip()
    c = consts(show(git_dir, full, "deepspeed/runtime/constants.py"))
    top = {v for k, v in c.items() if k.isupper() and not k.endswith(("_DEFAULT", "_FORMAT"))}
    zc = consts(show(git_dir, full, "deepspeed/runtime/zero/config.py"))
    ac_src = show(git_dir, full, "deepspeed/runtime/activation_checkpointing/config.py")
    ac = consts(ac_src)
    top |= {zc["ZERO_OPTIMIZATION"], ac["ACT_CHKPT"], "pipeline", "tensor_parallel"}
    cfg = show(git_dir, full, "deepspeed/runtime/config.py")
    assert '"pipe_partitioned"' in cfg and 'param_dict.get("pipeline"' in cfg, "get_pipeline_config moved"
    prec = show(git_dir, full, "deepspeed/runtime/precision_config.py")
    out = {
        "source": "deepspeedai/DeepSpeed deepspeed/runtime (constants.py, config.py, zero/config.py, "
                  "activation_checkpointing/config.py, precision_config.py, tensor_parallel/config.py)",
        "commit": full,
        "extracted_by": "tests/export/extract_deepspeed.py",
        "top": sorted(top),
        "zero_optimization": model_fields(show(git_dir, full, "deepspeed/runtime/zero/config.py"),
                                          "DeepSpeedZeroConfig"),
        "bf16": model_fields(prec, "DeepSpeedBF16Config"),
        "fp16": model_fields(prec, "DeepSpeedFP16Config"),
        "activation_checkpointing": sorted(v for k, v in ac.items()
                                           if k.startswith("ACT_CHKPT_") and not k.endswith(("_DEFAULT", "_FORMAT"))),
        "pipeline": ["activation_checkpoint_interval", "grad_partitioned", "partition", "pipe_partitioned",
                     "seed_layers", "stages"],
        "tensor_parallel": model_fields(show(git_dir, full, "deepspeed/runtime/tensor_parallel/config.py"),
                                        "TPTrainingConfig"),
        # runtime/pipe/module.py PipelineModule.__init__ keyword arguments and _partition_layers methods
        "PipelineModule": sorted(a.arg for a in next(
            n for n in ast.walk(ast.parse(show(git_dir, full, "deepspeed/runtime/pipe/module.py")))
            if isinstance(n, ast.FunctionDef) and n.name == "__init__" and
            any(getattr(x, "arg", "") == "partition_method" for x in n.args.args)).args.args if a.arg != "self"),
        "partition_methods": ["uniform", "parameters", "type:<regex>"],
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
