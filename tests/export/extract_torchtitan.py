#!/usr/bin/env python3
"""Extract torchtitan's TOML job-config sections and keys from its source, without importing it.

torchtitan up to v0.2.2 reads a TOML file into the JobConfig dataclass of torchtitan/config/job_config.py: each field
of JobConfig is a [section] whose keys are that dataclass's fields; a field holding another dataclass is a subsection
([quantize.linear.float8]). Literal types give the accepted values. Also recorded: the llama3 flavors
(torchtitan/models/llama3/__init__.py llama3_args), the model converters registered with register_model_converter,
and the pipeline schedule names of torch.distributed.pipelining get_schedule_class (pytorch/pytorch
torch/distributed/pipelining/schedules.py at the commit named below; single-stage: PipelineScheduleSingle subclasses,
V-style: the stage placement torchtitan's pipeline_module_split gives ZBVZeroBubble and DualPipeV).

usage: extract_torchtitan.py GIT_DIR [COMMIT] > tests/data/export/torchtitan_keys.json   (COMMIT default v0.2.2)
"""
import ast
import json
import subprocess
import sys

TORCH_COMMIT = "00722e648b740f91d0e71494baa17891749fd291"


def show(git_dir, commit, path):
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def literal_choices(ann):
    if isinstance(ann, ast.Subscript) and getattr(ann.value, "id", "") == "Literal":
        elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        return [ast.literal_eval(e) for e in elts]
    if isinstance(ann, ast.BinOp):  # Literal[...] | None
        return literal_choices(ann.left) or literal_choices(ann.right)
    return None


def main():
    git_dir = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else "v0.2.2"
    full = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", commit + "^{commit}"], check=True,
                          capture_output=True, text=True).stdout.strip()
    tree = ast.parse(show(git_dir, full, "torchtitan/config/job_config.py"))
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def fields(cls):
        out = []
        for st in classes[cls].body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                sub = None
                if isinstance(st.annotation, ast.Name) and st.annotation.id in classes:
                    sub = st.annotation.id
                out.append((st.target.id, sub, literal_choices(st.annotation)))
        return out

    sections = {}

    def walk(cls, path):
        keys = {}
        for name, sub, choices in fields(cls):
            if sub:
                walk(sub, f"{path}.{name}" if path else name)
            elif path:
                keys[name] = choices
        if path:
            sections[path] = keys

    walk("JobConfig", "")
    init = ast.parse(show(git_dir, full, "torchtitan/models/llama3/__init__.py"))
    flavors = []
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "llama3_args":
            flavors = [ast.literal_eval(k) for k in node.value.keys]
    grep = subprocess.run(["git", "--git-dir", git_dir, "grep", "-h", "register_model_converter(", full, "--",
                           "torchtitan/components"], capture_output=True, text=True).stdout
    converters = sorted({line.split('"')[1] for line in grep.splitlines() if line.count('"') >= 2})
    out = {
        "source": "pytorch/torchtitan torchtitan/config/job_config.py, models/llama3/__init__.py, "
                  "components/quantization",
        "commit": full,
        "tag": commit,
        "extracted_by": "tests/export/extract_torchtitan.py",
        "sections": sections,
        "llama3_flavors": flavors,
        "converters": converters,
        "schedules": {
            "torch_commit": TORCH_COMMIT,
            "names": ["1F1B", "Interleaved1F1B", "GPipe", "LoopedBFS", "InterleavedZeroBubble",
                      "PipelineScheduleSingle", "PipelineScheduleMulti", "ZBVZeroBubble", "DualPipeV"],
            "single_stage": ["1F1B", "GPipe", "PipelineScheduleSingle"],
            "v_style": ["ZBVZeroBubble", "DualPipeV"],
        },
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
