#!/usr/bin/env bash
# The layout rules a compiler does not check: C sources and headers at most 120 columns (.clang-format's ColumnLimit),
# no tab characters, no trailing blanks. Prints file:line for each offence; exit 1 if any. Run by ctest (style).
#   scripts/check-style.sh [ROOT]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.c' '*.h' '*.c.in' '*.h.in')
else
  mapfile -t files < <(find . -name build -prune -o \( -name '*.c' -o -name '*.h' \) -print)
fi
((${#files[@]})) || { echo "check-style: no C files under $root" >&2; exit 2; }
bad=$(awk '
  length($0) > 120 { printf "%s:%d: %d columns (at most 120)\n", FILENAME, FNR, length($0); n++ }
  /\t/             { printf "%s:%d: tab character\n", FILENAME, FNR; n++ }
  /[ \t]+$/        { printf "%s:%d: trailing blank\n", FILENAME, FNR; n++ }
' "${files[@]}")
if [[ -n $bad ]]; then
  echo "$bad"
  echo "check-style: $(wc -l <<<"$bad") offence(s) in ${#files[@]} files"
  exit 1
fi
echo "check-style: ${#files[@]} files, no offence"
