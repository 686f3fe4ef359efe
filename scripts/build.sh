#!/usr/bin/env bash
# Configure and build psearch into ./build (or $PS_BUILD_DIR). Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PS_BUILD_DIR:-build}
cmake -S . -B "$build" "$@" >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
grep -E "^-- psearch:" "$build.configure.log" || true
cmake --build "$build" -j "$(nproc)"
