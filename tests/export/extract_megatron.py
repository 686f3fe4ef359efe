#!/usr/bin/env python3
"""Extract Megatron-LM's command-line flags from its source, without importing it (no torch needed).

Megatron-LM builds its parser in megatron/training/arguments.py: explicit add_argument calls, plus groups that
ArgumentGroupFactory (megatron/training/argument_utils.py) derives from dataclasses (TransformerConfig,
ModelParallelConfig, the configs of megatron/training/config/): a field `foo_bar` becomes --foo-bar; a bool field that
defaults to True becomes --no-foo-bar and --disable-foo-bar (store_false); metadata {"argparse_meta": {"arg_names":
[...]}} renames it; Literal types and Enums give the choices (an Enum by member name).

usage: extract_megatron.py GIT_DIR [COMMIT] > tests/data/export/megatron_flags.json
(GIT_DIR: a bare clone or mirror of NVIDIA/Megatron-LM; read with `git show`, nothing is checked out.)
"""
import ast
import json
import subprocess
import sys


def show(git_dir, commit, path):
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def ls(git_dir, commit, folder):
    out = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "--name-only", f"{commit}:{folder}"], check=True,
                         capture_output=True, text=True).stdout
    return [f"{folder}/{n}" for n in out.split() if n.endswith(".py")]


def literal(node):
    try:
        return ast.literal_eval(node)
    except Exception:
        return None


def kw(call, name):
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def ann_info(ann, enums):
    """(is_bool, choices) of a field annotation."""
    if ann is None:
        return False, None
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):  # string annotation
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return False, None
    if isinstance(ann, ast.Name):
        if ann.id == "bool":
            return True, None
        if ann.id in enums:
            return False, enums[ann.id]
        return False, None
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):  # X | None
        for side in (ann.left, ann.right):
            if not (isinstance(side, ast.Constant) and side.value is None):
                return ann_info(side, enums)
    if isinstance(ann, ast.Subscript):
        head = ann.value.id if isinstance(ann.value, ast.Name) else getattr(ann.value, "attr", "")
        inner = ann.slice
        if head == "Optional":
            return ann_info(inner, enums)
        if head == "Literal":
            elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            return False, [literal(e) for e in elts]
        if head == "Union":
            elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            if len(elts) == 2 and isinstance(elts[1], ast.Constant) and elts[1].value is None:
                return ann_info(elts[0], enums)
    return False, None


def dataclass_fields(classes, name, enums):
    """[(field name, is_bool, default, choices, arg_names or None, init)] including the bases, base first."""
    node = classes.get(name)
    if node is None:
        raise SystemExit(f"class {name} not found")
    out = []
    for b in node.bases:
        if isinstance(b, ast.Name) and b.id in classes:
            out += dataclass_fields(classes, b.id, enums)
    for st in node.body:
        if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
            continue
        if isinstance(st.annotation, ast.Subscript) and getattr(st.annotation.value, "id", "") == "ClassVar":
            continue
        is_bool, choices = ann_info(st.annotation, enums)
        default, names, init = None, None, True
        v = st.value
        if isinstance(v, ast.Call) and getattr(v.func, "id", getattr(v.func, "attr", "")) == "field":
            d = kw(v, "default")
            default = literal(d) if d is not None else None
            i = kw(v, "init")
            init = literal(i) if i is not None else True
            md = kw(v, "metadata")
            if isinstance(md, ast.Dict):
                for k, val in zip(md.keys, md.values):
                    if literal(k) == "argparse_meta" and isinstance(val, ast.Dict):
                        for k2, v2 in zip(val.keys, val.values):
                            if literal(k2) == "arg_names":
                                names = literal(v2)
        elif v is not None:
            default = literal(v)
        # a redefinition in a subclass replaces the base's field
        out = [f for f in out if f[0] != st.target.id]
        out.append((st.target.id, is_bool, default, choices, names, init))
    return out


def main():
    git_dir = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    full = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", commit], check=True, capture_output=True,
                          text=True).stdout.strip()
    files = ["megatron/core/transformer/transformer_config.py", "megatron/core/model_parallel_config.py",
             "megatron/core/fault_injector.py"]
    files += ls(git_dir, full, "megatron/training/config")
    classes, enums = {}, {}
    enum_src = ast.parse(show(git_dir, full, "megatron/core/transformer/enums.py"))
    for node in enum_src.body:
        if isinstance(node, ast.ClassDef):
            enums[node.name] = [t.targets[0].id for t in node.body
                                if isinstance(t, ast.Assign) and isinstance(t.targets[0], ast.Name)]
    for f in files:
        for node in ast.walk(ast.parse(show(git_dir, full, f))):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, node)
    flags = {}

    def put(name, value, choices):
        flags[name] = {"value": value, "choices": choices}

    args_src = ast.parse(show(git_dir, full, "megatron/training/arguments.py"))
    for fn in ast.walk(args_src):
        if not isinstance(fn, ast.FunctionDef):
            continue
        assigns = {t.targets[0].id: t.value for t in ast.walk(fn)
                   if isinstance(t, ast.Assign) and len(t.targets) == 1 and isinstance(t.targets[0], ast.Name)}
        for call in ast.walk(fn):
            if not isinstance(call, ast.Call):
                continue
            fname = getattr(call.func, "attr", getattr(call.func, "id", ""))
            if fname == "add_argument":
                names = [literal(a) for a in call.args if isinstance(literal(a), str) and literal(a).startswith("--")]
                act = literal(kw(call, "action")) if kw(call, "action") is not None else None
                ch = kw(call, "choices")
                choices = literal(ch) if ch is not None else None
                for n in names:
                    put(n, act not in ("store_true", "store_false", "store_const", "count"), choices)
            elif fname == "ArgumentGroupFactory" and call.args and isinstance(call.args[0], ast.Name):
                ex = kw(call, "exclude")
                if isinstance(ex, ast.Name):
                    ex = assigns.get(ex.id)
                exclude = set(literal(ex) or []) if ex is not None else set()
                for name, is_bool, default, choices, names, init in dataclass_fields(classes, call.args[0].id, enums):
                    if name in exclude or init is False:
                        continue
                    if is_bool:
                        # store_true when the default is False, else store_false with --no- / --disable- names
                        auto = ["--" + name.replace("_", "-")] if default is False else \
                            ["--no-" + name.replace("_", "-"), "--disable-" + name.replace("_", "-")]
                    else:
                        auto = ["--" + name.replace("_", "-")]
                    for n in names or auto:
                        put(n, not is_bool, choices)
    json.dump({"source": "NVIDIA/Megatron-LM megatron/training/arguments.py (+ the dataclasses it builds groups from)",
               "commit": full, "extracted_by": "tests/export/extract_megatron.py",
               "flags": dict(sorted(flags.items()))}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
