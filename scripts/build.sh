#!/usr/bin/env bash
# Configure and build moetier into build/ (Release). Extra arguments go to cmake's
# configure step, e.g. scripts/build.sh -DMOETIER_TESTS=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$jobs"
