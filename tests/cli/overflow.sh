#!/usr/bin/env bash
# Sizes as a class (issue #23): node, GPU, batch, sequence and layer counts at 2^31, 2^32, 2^63-1 and 2^63 through
# every input path that carries one. Each run must end within 30 s with exit 1 (nothing fits) or 2 (refused), one
# error line, and no sign of an overflow in it (a negative count, inf, nan). A new path joins by one line.
#   overflow.sh PSEARCH DATA_DIR
set -u
psearch=$1
data=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cli/test_lib.sh
source "$here/test_lib.sh"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch" || exit 1

# NAME | allowed exits | arguments, @V@ for the value; files made from templates below (@V@ in their text)
paths=(
  "gbs          | 1 2 | --model gpt3-1.3b --cluster dgx-a100-80g:1 --gbs @V@"
  "gbs_range    | 1 2 | --model gpt3-1.3b --cluster dgx-a100-80g:1 --gbs-range 64:@V@:64"
  "preset_nodes | 2   | --model gpt3-1.3b --cluster dgx-a100-80g:@V@"
  "json_nodes   | 2   | --model gpt3-1.3b --cluster ./nodes.json"
  "json_gpus    | 2   | --model gpt3-1.3b --cluster ./gpus.json"
  "layers_x     | 2   | --model ./x.layers --cluster dgx-a100-80g:1"
  "json_repeat  | 2   | --model ./repeat.json --cluster dgx-a100-80g:1"
  "hf_layers    | 2   | --model ./hf.json --cluster dgx-a100-80g:1"
  "seq          | 1 2 | --model gpt3-1.3b --cluster dgx-a100-80g:1 --seq @V@"
  "mbs_max      | 0 1 2 | --model gpt3-1.3b --cluster dgx-a100-80g:1 --gbs 64 --mbs-max @V@"
  "max_tp       | 0 1 2 | --model gpt3-1.3b --cluster dgx-a100-80g:1 --gbs 64 --max-tp @V@"
  "top          | 0 2 | --model gpt3-1.3b --cluster dgx-a100-80g:1 --gbs 64 --top @V@"
  "est_gbs      | 1 2 | estimate --model gpt3-1.3b --cluster dgx-a100-80g:1 --tp 1 --pp 1 --gbs @V@"
  "est_tp       | 2   | estimate --model gpt3-1.3b --cluster dgx-a100-80g:1 --tp @V@"
  "est_pp       | 2   | estimate --model gpt3-1.3b --cluster dgx-a100-80g:1 --pp @V@"
  "est_mbs      | 1 2 | estimate --model gpt3-1.3b --cluster dgx-a100-80g:1 --mbs @V@ --gbs @V@"
  "sched_stages | 2   | schedule --kind 1f1b --stages @V@ --micro 8"
  "sched_micro  | 2   | schedule --kind 1f1b --stages 4 --micro @V@"
  "vocab_pad    | 1 2 | --model gpt3-1.3b --cluster dgx-a100-80g:1 --vocab-pad @V@"
)

for v in 2147483648 4294967296 9223372036854775807 9223372036854775808; do
  sed "s/\"nodes\": 2,/\"nodes\": $v,/" "$data/clusters/good-v100-cpu.json" >nodes.json
  sed "s/\"gpus_per_node\": 4,/\"gpus_per_node\": $v,/" "$data/clusters/good-v100-cpu.json" >gpus.json
  printf 'set seq=1024 hidden=768 heads=12 vocab=50257\ndecoder x%s\n' "$v" >x.layers
  sed "s/\"repeat\": 12/\"repeat\": $v/" "$data/models/good/gpt2-small.json" >repeat.json
  sed "s/\"n_layer\": 12/\"n_layer\": $v/" "$data/models/hf/gpt2-124m.json" >hf.json
  for row in "${paths[@]}"; do
    name=$(sed 's/ *|.*//' <<<"$row")
    rest=${row#*| }
    allowed=$(sed 's/ *|.*//' <<<"$rest")
    args=${rest#*| }
    args=${args//@V@/$v}
    # shellcheck disable=SC2086 # the arguments hold no blanks
    out=$(timeout 30 "$psearch" $args 2>&1 </dev/null)
    rc=$?
    label="$name at $v"
    if [[ $rc -eq 124 ]]; then bad "$label: still running after 30 s"; continue; fi
    if [[ " $allowed " != *" $rc "* ]]; then
      bad "$label: exit $rc, expected one of: $allowed"; echo "$out" | head -2 | sed 's/^/     | /'; continue
    fi
    if [[ $rc -ne 0 ]] && [[ $(grep -c '^psearch: error' <<<"$out") -ne 1 ]]; then
      bad "$label: not exactly one error line"; echo "$out" | head -3 | sed 's/^/     | /'; continue
    fi
    if grep -E '^psearch: error' <<<"$out" | grep -qE '(^|[ (=x*])-[0-9]|\binf\b|\bnan\b'; then
      bad "$label: the message shows an overflow"; grep '^psearch: error' <<<"$out" | sed 's/^/     | /'; continue
    fi
    ok
  done
done
finish
