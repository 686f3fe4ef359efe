#!/usr/bin/env bash
# Install into a scratch prefix, then run the installed psearch with no PSEARCH_DATA_DIR from another directory:
# it must find its presets under <prefix>/share/psearch, not in the source tree.
set -eu
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
unset PSEARCH_DATA_DIR
cd /
"$prefix/bin/psearch" --version | grep -q "data .*$prefix/bin/../share/psearch" || {
  echo "installed psearch does not use the installed presets:"; "$prefix/bin/psearch" --version; exit 1; }
"$prefix/bin/psearch" model list | grep -qx gpt3-65b
"$prefix/bin/psearch" cluster show dgx-a100-80g:4 --format json | grep -q '"gpus": 32'
test -f "$prefix/share/psearch/models/gpt3-65b.json"
echo "1 passed, 0 failed"
