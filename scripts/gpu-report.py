#!/usr/bin/env python3
"""The report of scripts/gpu-check.sh: reads the step outputs it left in DIR and writes DIR/report.json and
DIR/report.txt (a table). Python's standard library only.

    scripts/gpu-report.py DIR [--shared 0|1]

The figures: cuBLAS GEMM rate per dtype against the catalog's dense peak of the detected GPU, the device copy bandwidth
against its HBM bandwidth, and for each single-GPU plan the measured iteration time and peak device memory against
the prediction, before (catalog figures) and after (the calibration's measured tables) calibration.
"""
import json
import os
import re
import sys
import time


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def pct(a, b):
    return None if a is None or b in (None, 0) else 100.0 * a / b


def err(pred, meas):
    return None if pred is None or meas in (None, 0) else 100.0 * (pred - meas) / meas


def steps_of(d):
    rows, total = [], None
    try:
        with open(os.path.join(d, "steps.tsv")) as f:
            for line in f:
                name, rc, s = line.rstrip("\n").split("\t")
                if name == "total":
                    total = float(s)
                else:
                    rows.append({"step": name, "exit": int(rc), "seconds": float(s)})
    except OSError:
        pass
    return rows, total


def ctest_of(d):
    """Each test's outcome from ctest's log: 'Test #N: NAME ....   Passed', '***Skipped', '***Failed'."""
    tests = []
    try:
        text = open(os.path.join(d, "ctest_gpu.log")).read()
    except OSError:
        return None
    for m in re.finditer(r"Test +#\d+: (\S+) \.+[ *]*(\w+)([^\n]*)", text):
        status = m.group(2).lower()
        sec = re.search(r"([\d.]+) sec", m.group(3))
        tests.append({"test": m.group(1), "status": {"passed": "passed", "skipped": "skipped"}.get(status, "failed"),
                      "seconds": float(sec.group(1)) if sec else None})
    return {"tests": tests, "passed": sum(t["status"] == "passed" for t in tests),
            "skipped": sum(t["status"] == "skipped" for t in tests),
            "failed": sum(t["status"] == "failed" for t in tests)}


def exec_of(doc):
    """(plan, its execution): `psearch exec --format json` puts the execution under 'exec'; --exec-top K lists its
    executions under 'executed', the first of them the best plan's, whose fields are the document's own."""
    if isinstance(doc, dict) and isinstance(doc.get("exec"), dict):
        return doc, doc["exec"]
    if isinstance(doc, dict) and isinstance(doc.get("executed"), list) and doc["executed"]:
        return doc, doc["executed"][0]
    return None, None


def plan_row(name, doc, after):
    p, e = exec_of(doc)
    if p is None:
        return {"plan": name, "executed": False}
    meas, pred = e.get("measured", {}), e.get("predicted", {})
    row = {"plan": name, "executed": True, "backend": e.get("backend"), "comparable": e.get("comparable"),
           "shape": "tp %s x dp %s x pp %s, mbs %s, gbs %s, recompute %s, overlap %s" % (
               p.get("tp"), p.get("dp"), p.get("pp"), p.get("mbs"), p.get("gbs"), p.get("ckpt"), p.get("overlap")),
           "measured_iter_s": meas.get("iter_time_s"), "spread": meas.get("spread"),
           "predicted_iter_s": pred.get("iter_time_s"),
           "measured_peak_gib": meas.get("peak_mem_gib"), "predicted_peak_gib": pred.get("peak_mem_gib")}
    row["iter_error_pct"] = err(row["predicted_iter_s"], row["measured_iter_s"])
    row["peak_error_pct"] = err(row["predicted_peak_gib"], row["measured_peak_gib"])
    a = (after or {}).get("predicted") or {}
    row["predicted_after_iter_s"] = a.get("iter_time_s")
    row["iter_error_after_pct"] = err(row["predicted_after_iter_s"], row["measured_iter_s"])
    row["overlapped_allreduces"] = e.get("overlapped_allreduces_per_iteration")
    return row


def fmt(v, spec="%.3f", none="-"):
    return none if v is None else spec % v


def main():
    if len(sys.argv) < 2:
        sys.stderr.write("usage: gpu-report.py DIR [--shared 0|1]\n")
        return 2
    d = sys.argv[1]
    shared = "--shared" in sys.argv and sys.argv[sys.argv.index("--shared") + 1] == "1"
    steps, total = steps_of(d)
    smi = ""
    try:
        smi = open(os.path.join(d, "nvidia-smi.csv")).readline().strip()
    except OSError:
        pass
    f = [x.strip() for x in smi.split(",")] if smi else []
    version = ""
    try:
        version = open(os.path.join(d, "version.log")).read().strip()
    except OSError:
        pass
    cluster = load(os.path.join(d, "cluster.json"))
    gpu = {}
    if cluster and cluster.get("node_groups"):
        gpu = cluster["node_groups"][0].get("gpu") or {}
    db = load(os.path.join(d, "costdb.json")) or {}
    peaks = db.get("gemm_peak_flops") or {}
    cal = {"gemm_tflops": {k: v / 1e12 for k, v in peaks.items()},
           "catalog_tflops": {k: gpu.get(k + "_TFLOPs") for k in peaks if gpu.get(k + "_TFLOPs")},
           "copy_GBps": (db.get("mem_Bps_median") or 0) / 1e9 or None, "catalog_hbm_GBps": gpu.get("hbm_GBps")}
    cal["gemm_pct_of_catalog"] = {k: pct(cal["gemm_tflops"][k], cal["catalog_tflops"].get(k))
                                  for k in cal["gemm_tflops"] if cal["catalog_tflops"].get(k)}
    cal["copy_pct_of_hbm"] = pct(cal["copy_GBps"], cal["catalog_hbm_GBps"])
    cal["rows"] = db.get("rows")

    plans = []
    for name in ("none", "selective", "full"):
        doc = load(os.path.join(d, "exec_%s.json" % name))
        if doc is not None or os.path.exists(os.path.join(d, "plan_%s.json" % name)):
            plans.append(plan_row("recompute " + name, doc, load(os.path.join(d, "after_%s.json" % name))))
    doc = load(os.path.join(d, "exec_search.json"))
    if doc is not None:
        plans.append(plan_row("search best", doc, load(os.path.join(d, "after_search.json"))))

    db2 = load(os.path.join(d, "costdb2.json")) or {}
    two = {"shared_gpu": shared, "calibration_rows": db2.get("rows"),
           "nccl_version": (db2.get("provenance") or {}).get("nccl_version") or db2.get("nccl_version"),
           "exec": []}
    for name in ("tp2", "zero3", "pp2", "te2", "cp2", "cpa2a", "ep2"):
        if os.path.exists(os.path.join(d, "plan2_%s.json" % name)):
            two["exec"].append(plan_row(name, load(os.path.join(d, "exec2_%s.json" % name)), None))

    report = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "device": {"name": f[0] if f else None, "memory": f[1] if len(f) > 1 else None,
                         "driver": f[2] if len(f) > 2 else None, "compute_capability": f[3] if len(f) > 3 else None},
              "psearch_version": version.splitlines()[0] if version else None,
              "detected_gpu": gpu.get("name"), "steps": steps, "total_s": total, "ctest": ctest_of(d),
              "calibration": cal, "plans": plans, "two_ranks": two,
              "failed_steps": [s["step"] for s in steps if s["exit"] != 0],
              "units": "seconds, GiB, TFLOP/s, GB/s; errors are (predicted - measured) / measured"}
    tmp = os.path.join(d, ".report.json.tmp")
    with open(tmp, "w") as out:
        json.dump(report, out, indent=1)
    os.replace(tmp, os.path.join(d, "report.json"))

    L = []
    L.append("gpu-check %s on %s (%s, driver %s)" % (report["date"], report["device"]["name"],
                                                    report["device"]["memory"], report["device"]["driver"]))
    L.append("")
    L.append("%-26s %8s %6s" % ("step", "seconds", "exit"))
    for s in steps:
        L.append("%-26s %8.1f %6d" % (s["step"], s["seconds"], s["exit"]))
    L.append("%-26s %8s" % ("total", fmt(total, "%.1f")))
    if report["ctest"]:
        c = report["ctest"]
        L.append("")
        L.append("ctest -L gpu: %d passed, %d skipped, %d failed (%s)" % (
            c["passed"], c["skipped"], c["failed"], ", ".join("%s %s" % (t["test"], t["status"]) for t in c["tests"])))
    L.append("")
    L.append("%-8s %12s %12s %8s" % ("gemm", "TFLOP/s", "catalog", "%"))
    for k in ("fp32", "fp16", "bf16", "fp8"):
        if k in cal["gemm_tflops"]:
            L.append("%-8s %12.1f %12s %8s" % (k, cal["gemm_tflops"][k], fmt(cal["catalog_tflops"].get(k), "%.1f"),
                                               fmt(cal["gemm_pct_of_catalog"].get(k), "%.1f")))
    L.append("%-8s %12s %12s %8s   (GB/s, read + write)" % ("copy", fmt(cal["copy_GBps"], "%.0f"),
                                                           fmt(cal["catalog_hbm_GBps"], "%.0f"),
                                                           fmt(cal["copy_pct_of_hbm"], "%.1f")))
    L.append("")
    L.append("%-20s %9s %9s %8s %9s %8s %9s %9s %8s" % ("plan", "meas s", "pred s", "err %", "after s", "err %",
                                                       "meas GiB", "pred GiB", "err %"))
    for p in plans + two["exec"]:
        if not p["executed"]:
            L.append("%-20s not executed" % p["plan"])
            continue
        L.append("%-20s %9s %9s %8s %9s %8s %9s %9s %8s" % (
            p["plan"], fmt(p["measured_iter_s"]), fmt(p["predicted_iter_s"]), fmt(p["iter_error_pct"], "%+.1f"),
            fmt(p["predicted_after_iter_s"]), fmt(p["iter_error_after_pct"], "%+.1f"),
            fmt(p["measured_peak_gib"], "%.2f"), fmt(p["predicted_peak_gib"], "%.2f"),
            fmt(p["peak_error_pct"], "%+.1f")))
    if two["exec"]:
        L.append("(%s: two ranks on %s)" % (", ".join(p["plan"] for p in two["exec"]),
            "one shared GPU over NCCL's socket transport: their times are not those of two GPUs, and each rank's "
            "measured peak holds both ranks' memory" if shared else "two GPUs"))
    if report["failed_steps"]:
        L.append("")
        L.append("FAILED: " + ", ".join(report["failed_steps"]))
    with open(os.path.join(d, "report.txt"), "w") as out:
        out.write("\n".join(L) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
