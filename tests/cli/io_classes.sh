#!/usr/bin/env bash
# What a path names, as a class (issue #23): every entry point that reads a file is given a FIFO, a directory,
# /dev/zero, a symbolic-link loop and an unreadable file, and must refuse each at once (exit 2, one error naming the
# path, nothing left behind, no hang); every entry point that writes is given a device, a FIFO, a symbolic link to a
# file, a read-only directory and an existing directory, and must write a stream in place (device, FIFO), write
# through the link (which stays a link), or refuse (exit 2) without replacing what the path named. A new input or
# output joins by one line in the tables below. Unreadable and read-only cases run as user nobody (root reads and
# writes through any permission), skipped where setpriv is missing.
#   io_classes.sh PSEARCH DATA_DIR
set -u
psearch=$1
data=$2
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/cli/test_lib.sh
source "$here/test_lib.sh"
scratch=$(mktemp -d)
chmod 755 "$scratch"
trap 'rm -rf "$scratch"' EXIT
cd "$scratch" || exit 1
plan=$data/plans/gpt3-1.3b-pp2.json
model=$data/models/good/gpt2-small.json
cp "$plan" plan.json
"$psearch" calibrate --quick --reps 1 --out db.h5 >/dev/null 2>&1 || bad "setup: calibrate --quick into db.h5"

# Inputs: NAME | arguments, with @IN@ where the bad path goes.
inputs=(
  "model       | --model @IN@ --cluster dgx-a100-80g:1"
  "cluster     | --model gpt3-1.3b --cluster @IN@"
  "costdb      | --model gpt3-1.3b --cluster dgx-a100-80g:1 --costdb @IN@"
  "plan        | estimate --model gpt3-1.3b --cluster dgx-a100-80g:1 --plan @IN@"
  "times       | schedule --kind 1f1b --stages 2 --micro 4 --times @IN@"
  "exec_plan   | exec @IN@ --backend cpu"
  "costdb_show | costdb show @IN@"
  "costdb_merge| costdb merge @IN@ db.h5 --out merged.h5"
  "sweep_model | sweep --models @IN@ --clusters dgx-a100-80g:1 --out sweepdir"
  "model_show  | model show @IN@"
  "cluster_show| cluster show @IN@"
)
# Outputs: NAME | KIND (stream: a plan/table/SVG, written in place on a device or FIFO; whole: an HDF5 database or a
# folder, refused there) | arguments, with @OUT@ where the path goes.
outputs=(
  "out         | stream | --model gpt3-1.3b --cluster dgx-a100-80g:1 --out @OUT@"
  "svg         | stream | schedule --kind 1f1b --stages 2 --micro 4 --svg @OUT@"
  "schedule_out| stream | schedule --kind 1f1b --stages 2 --micro 4 --out @OUT@"
  "estimate_out| stream | estimate --model gpt3-1.3b --cluster dgx-a100-80g:1 --vocab-pad 256 --out @OUT@"
  "calibrate   | whole  | calibrate --quick --reps 1 --out @OUT@"
  "merge       | whole  | costdb merge db.h5 db2.h5 --out @OUT@"
  "sweep       | whole  | sweep --models gpt3-1.3b --clusters dgx-a100-80g:1 --out @OUT@"
)
cp db.h5 db2.h5 2>/dev/null

# The device is a node of our own (the same as /dev/null): a build with the bug this test looks for replaces what the
# path names, and must never get the machine's /dev/null to replace. Root only (mknod); skipped otherwise.
device=
zero=/dev/zero
if mknod dev.null c 1 3 2>/dev/null && chmod 666 dev.null; then device=./dev.null; fi
if mknod dev.zero c 1 5 2>/dev/null; then zero=./dev.zero; fi

nobody=()
if command -v setpriv >/dev/null 2>&1; then
  nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
fi

run() { # expected-rc label path args-with-placeholder...; sets $out
  local want=$1 label=$2 path=$3 ph=$4
  shift 4
  local args=() a rc
  for a in $*; do args+=("${a//$ph/$path}"); done
  out=$(timeout 60 "${prefix[@]}" "$psearch" "${args[@]}" 2>&1 </dev/null)
  rc=$?
  if [[ $rc -eq 124 ]]; then bad "$label: hung (killed after 60 s)"; return 1; fi
  if [[ $want != any && $rc -ne $want ]]; then
    bad "$label: exit $rc, expected $want"; echo "$out" | head -3 | sed 's/^/     | /'; return 1
  fi
  return 0
}

one_error_naming() { # label path
  if [[ $(grep -c '^psearch: error' <<<"$out") -ne 1 ]]; then
    bad "$1: not exactly one error line"; echo "$out" | head -3 | sed 's/^/     | /'
  elif ! grep -qF -- "$2" <<<"$out"; then
    bad "$1: the message does not name $2"; echo "$out" | head -2 | sed 's/^/     | /'
  else
    ok
  fi
}

# ---- inputs ----
mkfifo in.fifo
mkdir in.dir
ln -s in.loop2 in.loop1
ln -s in.loop1 in.loop2
echo '{}' >in.unreadable
chmod 000 in.unreadable
for row in "${inputs[@]}"; do
  name=$(sed 's/ *|.*//' <<<"$row")
  args=${row#*| }
  for bad_in in ./in.fifo ./in.dir $zero ./in.loop1 ./in.unreadable; do
    prefix=()
    if [[ $bad_in == ./in.unreadable ]]; then
      ((${#nobody[@]})) || continue
      prefix=("${nobody[@]}")
    fi
    run 2 "input $name $bad_in" "$bad_in" @IN@ "$args" && one_error_naming "input $name $bad_in" "$bad_in"
  done
  # the FIFO is still a FIFO, nothing was written beside the inputs
  check "input $name: in.fifo still a FIFO" test -p in.fifo
  check "input $name: no output left" test ! -e merged.h5 -a ! -e sweepdir/cells.jsonl
  rm -rf sweepdir
done

# ---- outputs ----
prefix=()
for row in "${outputs[@]}"; do
  name=$(sed 's/ *|.*//' <<<"$row")
  rest=${row#*| }
  kind=$(sed 's/ *|.*//' <<<"$rest")
  args=${rest#*| }
  # a device
  if [[ -n $device ]]; then
    if [[ $kind == stream ]]; then
      run 0 "output $name device" $device @OUT@ "$args" && ok
    else
      run 2 "output $name device" $device @OUT@ "$args" && one_error_naming "output $name device" $device
    fi
    check "output $name: the device is still a character device" test -c $device
  fi
  # a FIFO: a stream output reaches its reader; a whole one is refused and the FIFO stays
  rm -f out.fifo got
  mkfifo out.fifo
  if [[ $kind == stream ]]; then
    (timeout 60 cat out.fifo >got) &
    reader=$!
    run 0 "output $name FIFO" ./out.fifo @OUT@ "$args"
    wait $reader
    check "output $name: the FIFO's reader got the output" test -s got
  else
    run 2 "output $name FIFO" ./out.fifo @OUT@ "$args" && one_error_naming "output $name FIFO" out.fifo
  fi
  check "output $name: out.fifo still a FIFO" test -p out.fifo
  # a symbolic link to a file: written through, the link stays
  rm -rf target link
  echo old >target
  ln -s target link
  if [[ $kind == stream || $name != sweep ]]; then
    run 0 "output $name link" ./link @OUT@ "$args"
    check "output $name: link still a link" test -L link
    check "output $name: the link's target was written" test "$(head -c 3 target)" != old
  else
    # a folder output given a link to a file: refused, the file untouched
    run 2 "output $name link to a file" ./link @OUT@ "$args"
    check "output $name: the file behind the link untouched" test "$(cat target)" = old
  fi
  # an existing directory: refused (a folder output takes it as its folder), never replaced
  rm -rf exists
  mkdir exists
  if [[ $name == sweep ]]; then
    run 0 "output $name existing folder" ./exists @OUT@ "$args"
    check "output $name: cells recorded in the folder" test -s exists/cells.jsonl
  else
    run 2 "output $name existing directory" ./exists @OUT@ "$args" &&
      one_error_naming "output $name existing directory" exists
    check "output $name: the directory is still a directory" test -d exists
  fi
  # a read-only directory, as nobody: refused, nothing left in it
  if ((${#nobody[@]})); then
    rm -rf ro
    mkdir ro
    chmod 555 ro
    prefix=("${nobody[@]}")
    target_in_ro=./ro/x
    [[ $name == sweep ]] && target_in_ro=./ro/folder
    run 2 "output $name read-only folder" "$target_in_ro" @OUT@ "$args" &&
      one_error_naming "output $name read-only folder" "ro/"
    prefix=()
    check "output $name: nothing left in the read-only folder" test -z "$(ls -A ro)"
  fi
done

# ---- one destination, two outputs ----
prefix=()
run 2 "--out F --svg F" F.txt @F@ "--model gpt3-1.3b --cluster dgx-a100-80g:1 --out @F@ --svg ./@F@" &&
  one_error_naming "--out F --svg F" "name the same file"
check "--out F --svg F: nothing written" test ! -e F.txt
ln -s F.txt F.link
run 2 "--out F --svg link-to-F" F.txt @F@ "schedule --kind 1f1b --stages 2 --micro 4 --out @F@ --svg F.link" &&
  one_error_naming "--out F --svg link-to-F" "name the same file"

finish
