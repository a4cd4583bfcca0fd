#!/usr/bin/env bash
# Run the C API test programs under valgrind memcheck: the ctest label `valgrind` of
# capi-tests (each test as `valgrind --error-exitcode=1 --leak-check=full --fair-sched=yes`, suppressions in
# capi-tests/valgrind.supp). Installs valgrind (and cmake, pkg-config) with apt-get if missing.
#
#   scripts/test-valgrind.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
jobs="$(nproc 2>/dev/null || echo 2)"

. scripts/need_commands.sh
need_commands valgrind:valgrind cmake:cmake pkg-config:pkg-config c++:g++

echo "== cargo build --release"
cargo build --release
echo "== configure and build capi-tests (build/capi-tests)"
cmake -S capi-tests -B build/capi-tests -Ddagrt_DIR="$root/cmake"
cmake --build build/capi-tests --parallel "$jobs"
echo "== ctest -L valgrind"
ctest --test-dir build/capi-tests --output-on-failure -L valgrind
