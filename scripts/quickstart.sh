#!/usr/bin/env bash
# README command 1: install what is missing, build, and plan gpt3-65b on 4 DGX A100 80 GB nodes (the default).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec ./build/cli/psearch "$@"
