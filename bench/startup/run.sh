#!/usr/bin/env bash
# What a single-process run costs before and around its work (issue #19, item 9): wall time, peak resident memory
# and minor page faults of `psearch --version` and of a small search (llama2-7b, seq 2048, one DGX A100 node, gbs 64),
# each run N times (default 10) without a launcher; the search's own time is the wall_s it reports. Prints JSON.
# Target: the small search under 0.15 s wall on the 2-core development machine.
#   bench/startup/run.sh [BUILD_DIR] [N]
set -euo pipefail
build=${1:-build}
n=${2:-10}
root=$(cd "$(dirname "$0")/../.." && pwd)
ps="$build/cli/psearch"
[[ -x $ps ]] || { echo "startup: no $ps" >&2; exit 2; }
export PSEARCH_DATA_DIR="$root/presets"
measure() { # name args...: one JSON object
  local name=$1 i w m f
  shift
  local walls=() rss=() flt=() search=()
  for ((i = 0; i < n; i++)); do
    /usr/bin/time -o "$tmp.time" -f "%e %M %R" "$ps" "$@" --format json >"$tmp" 2>/dev/null || true
    read -r w m f <"$tmp.time"
    walls+=("$w"); rss+=("$m"); flt+=("$f")
    search+=("$(python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1]))["search"]["wall_s"])
except Exception: print("null")' "$tmp")")
  done
  python3 - "$name" "${walls[*]}" "${rss[*]}" "${flt[*]}" "${search[*]}" <<'PY'
import json, statistics, sys
name, w, r, f, s = sys.argv[1:]
w = [float(x) for x in w.split()]; r = [int(x) for x in r.split()]; f = [int(x) for x in f.split()]
s = [float(x) for x in s.split() if x != "null"]
print(json.dumps({"case": name, "runs": len(w), "wall_s_min": min(w), "wall_s_median": statistics.median(w),
                  "max_rss_kib_median": statistics.median(r), "minor_faults_median": statistics.median(f),
                  "search_wall_s_median": statistics.median(s) if s else None}))
PY
}
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.time"' EXIT
echo '{"benchmark": "startup", "target_s": 0.15, "cases": ['
measure version --version
echo ','
measure small_search --model llama2-7b --seq 2048 --cluster dgx-a100-80g:1 --gbs 64
echo ']}'
