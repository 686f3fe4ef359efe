#!/usr/bin/env python3
"""Measured vs predicted GEMM time from bench_gemm_shapes' JSON (bench/gpu/bench_gemm_shapes.c).

For each prediction the bench carries (pred_shape_s: the cost model's tile/wave shape model at its default tile;
pred_flat_s: the same roofline without it; pred_tile128x256_s: the shape model with a 128x256 tile) it prints the
median, mean and maximum absolute error in percent, the median signed error (positive: the model predicts slower
than measured) and how many shapes are within 10 %, over all shapes and per sweep. Then the wave-quantization check:
among the shapes whose 128x128 tile count is just past a multiple of the SM count, how much slower per FLOP they ran
than the shapes just below. Standard library only.

  scripts/gemm-shapes-report.py RESULT.json [--csv]
"""
import json
import statistics
import sys


def err_pct(pred, meas):
    return (pred - meas) / meas * 100.0


def stats(rows, key):
    errs = [err_pct(r[key], r["time_s"]) for r in rows if r.get(key) is not None and r["time_s"] > 0]
    if not errs:
        return None
    abs_errs = [abs(e) for e in errs]
    return {
        "n": len(errs),
        "median_abs": statistics.median(abs_errs),
        "mean_abs": statistics.fmean(abs_errs),
        "max_abs": max(abs_errs),
        "median_signed": statistics.median(errs),
        "within_10": sum(1 for e in abs_errs if e <= 10.0),
    }


def fmt(s):
    if s is None:
        return "no predictions"
    return ("n %3d  median |err| %6.1f%%  mean %6.1f%%  max %7.1f%%  median signed %+6.1f%%  within 10%%: %d"
            % (s["n"], s["median_abs"], s["mean_abs"], s["max_abs"], s["median_signed"], s["within_10"]))


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print("gemm-shapes-report: %s: %s" % (argv[1], e), file=sys.stderr)
        return 2
    rows = doc.get("shapes") or []
    if not rows:
        print("gemm-shapes-report: %s has no shapes" % argv[1], file=sys.stderr)
        return 2
    keys = [k for k in ("pred_shape_s", "pred_flat_s", "pred_tile128x256_s") if any(r.get(k) is not None for r in rows)]
    print("device %s (%s SMs), model GPU %s (%s SMs), %d shapes, %s"
          % (doc.get("device"), doc.get("sm_count"), doc.get("model_gpu"), doc.get("model_sm_count"), len(rows),
             doc.get("dtype", "?")))
    print("model params: %s" % json.dumps(doc.get("model_params", {})))
    desc = doc.get("predictions", {})
    groups = sorted({r["group"] for r in rows})
    for key in keys:
        print("\n%s (%s)" % (key, desc.get(key, "")))
        print("  %-22s %s" % ("all", fmt(stats(rows, key))))
        for g in groups:
            print("  %-22s %s" % (g, fmt(stats([r for r in rows if r["group"] == g], key))))

    # Wave quantization as measured: the square sweep's TFLOP/s just past a full wave against just before it.
    sms = doc.get("sm_count") or 0
    sq = sorted((r for r in rows if r["group"].startswith("square")), key=lambda r: r["m"])
    if sms and len(sq) > 2:
        print("\nwave steps in the square sweep (128x128 tiles over %d SMs): TFLOP/s before -> after the step" % sms)
        for a, b in zip(sq, sq[1:]):
            if b.get("waves", 0) > a.get("waves", 0):
                line = "  m=n %5d -> %5d  waves %2d -> %2d  %6.1f -> %6.1f TFLOP/s" % (
                    a["m"], b["m"], a["waves"], b["waves"], a["tflops"], b["tflops"])
                for key in keys:
                    line += "  %s %+.0f%%/%+.0f%%" % (key.replace("pred_", "").replace("_s", ""),
                                                     err_pct(a[key], a["time_s"]), err_pct(b[key], b["time_s"]))
                print(line)

    if "--csv" in argv[2:]:
        print("\ngroup,m,n,k,count,time_s,tflops," + ",".join(keys))
        for r in rows:
            print(",".join(str(r.get(c)) for c in ["group", "m", "n", "k", "count", "time_s", "tflops"] + keys))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
