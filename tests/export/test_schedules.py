#!/usr/bin/env python3
"""The pass order every exported schedule runs in its framework is the order psearch simulated.

For each framework's schedules (search/framework.c) and pipeline degrees 2-6, micro-batch counts from pp to 4 pp,
chunks 2 and 3 for the interleaved one, psearch's order (`psearch schedule --passes`) must equal the framework's, as
re-derived in fwlib.py from Megatron-LM's schedules.py, DeepSpeed's TrainSchedule and torch.distributed.pipelining.
torchtitan's ZBVZeroBubble must differ from psearch's v-zb, which is why framework.c does not export v-zb there (if
they ever agree, that rule can go).

usage: test_schedules.py PSEARCH
"""
import json
import subprocess
import sys

import fwlib


def psearch_order(psearch, kind, pp, n, vpp):
    args = [psearch, "schedule", "--kind", kind, "--stages", str(pp), "--micro", str(n), "--format", "json",
            "--passes"]
    if kind == "interleaved":
        args += ["--vpp", str(vpp)]
    d = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    return [[(p["op"], p["mb"], p["chunk"]) for p in dev["passes"]] for dev in d["per_device"]]


def main():
    psearch = sys.argv[1]
    checks = fails = 0
    refs = {
        "megatron": (fwlib.megatron_order, ["1f1b", "interleaved"]),
        "torchtitan": (fwlib.torch_order, ["gpipe", "1f1b", "interleaved"]),
        "deepspeed": (lambda kind, pp, n, vpp, r: fwlib.deepspeed_order(pp, n, r), ["1f1b"]),
    }
    for fw, (ref, kinds) in refs.items():
        for kind in kinds:
            for pp in range(2, 7):
                for n in sorted({pp, pp + 1, 2 * pp, 4 * pp}):
                    for vpp in ([2, 3] if kind == "interleaved" else [1]):
                        if kind == "interleaved" and n % pp:
                            continue  # psearch's interleaved takes multiples of pp (docs/schedules.md)
                        ours = psearch_order(psearch, kind, pp, n, vpp)
                        for r in range(pp):
                            checks += 1
                            theirs = ref(kind, pp, n, vpp, r)
                            if ours[r] != theirs:
                                fails += 1
                                print(f"FAIL {fw} {kind} pp {pp} n {n} vpp {vpp} rank {r}:\n  psearch {ours[r][:12]}"
                                      f"\n  {fw:8} {theirs[:12]}")
    same = 0
    for pp in range(2, 7):
        for n in (pp, 2 * pp, 4 * pp):
            ours = psearch_order(psearch, "v-zb", pp, n, 2)
            same += all(ours[r] == fwlib.torch_order("v-zb", pp, n, 2, r) for r in range(pp))
    checks += 1
    if same:
        fails += 1
        print(f"FAIL psearch's v-zb now equals torch's ZBVZeroBubble for {same} shapes: reconsider torchtitan's "
              "schedule list in search/framework.c")
    print(f"{checks - fails} of {checks} schedule orders agree")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
