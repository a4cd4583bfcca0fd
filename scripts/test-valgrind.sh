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

missing=()
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing: ${missing[*]}"
    [ "$(id -u)" = 0 ] || { echo "not root: install ${missing[*]} first" >&2; exit 1; }
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
fi

echo "== cargo build --release"
cargo build --release
echo "== configure and build capi-tests (build/capi-tests)"
cmake -S capi-tests -B build/capi-tests -Ddagrt_DIR="$root/cmake"
cmake --build build/capi-tests --parallel "$jobs"
echo "== ctest -L valgrind"
ctest --test-dir build/capi-tests --output-on-failure -L valgrind
