#!/usr/bin/env bash
# Run the tests under ThreadSanitizer: a nightly toolchain with rust-src (installed with rustup
# if missing), the standard library rebuilt instrumented (-Zbuild-std), build outputs in
# target/tsan. Any report fails the script.
#  1. The Rust tests (the library's unit tests and every integration test). The soaks run
#     under TSAN's 5-15x slowdown with these counts unless set: DAGRT_STRESS_RUNS (3000) and
#     DAGRT_FAULT_RUNS (2000), shorter than their defaults, and DAGRT_FUZZ_SEQS (300, its
#     default). The loom models are not built
#     here. DAGRT_TSAN=1 tells tests/sub_placement*.rs that tiny jobs are not tiny here: their
#     packing bursts and stalled-job moves run, but whether the jobs packed is not asserted.
#  2. The C harness's test programs (ctest label capi, in build/capi-tsan, compiled with
#     gcc -fsanitize=thread) against the instrumented libdagrt.so, except test_limits (TSAN's
#     own allocations fail under its RLIMIT_DATA). The package and example checks, which build
#     projects of their own without the flags, are left to command 2.
#     capi-tests/sanitizer/tsan_mem_shim.c supplies the three entry points GCC's libtsan
#     lacks. Installs cmake and pkg-config with apt-get if missing.
#
#   scripts/test-tsan.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

command -v rustup >/dev/null 2>&1 || { echo "rustup is needed to install a nightly toolchain" >&2; exit 1; }
if ! rustup +nightly component list --installed 2>/dev/null | grep -q '^rust-src'; then
    if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
        # A nightly is there: add the component, rather than move that toolchain to today's.
        echo "== adding rust-src to the nightly toolchain (rustup)"
        rustup component add rust-src --toolchain nightly
    else
        echo "== installing the nightly toolchain with rust-src (rustup)"
        rustup toolchain install nightly --profile minimal -c rust-src
    fi
fi
host="$(rustc +nightly -vV | sed -n 's/^host: //p')"

export RUSTFLAGS="-Zsanitizer=thread"
export CARGO_TARGET_DIR=target/tsan
export DAGRT_TSAN=1
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 suppressions=$root/scripts/tsan.supp ${TSAN_OPTIONS:-}"
export DAGRT_STRESS_RUNS="${DAGRT_STRESS_RUNS:-3000}"
export DAGRT_FAULT_RUNS="${DAGRT_FAULT_RUNS:-2000}"
export DAGRT_FUZZ_SEQS="${DAGRT_FUZZ_SEQS:-300}"

# --target keeps the sanitizer off build scripts and proc macros (they run on the host).
echo "== cargo +nightly test -Zbuild-std --target $host --release --lib --tests (ThreadSanitizer)"
cargo +nightly test -Zbuild-std --target "$host" --release --lib --tests

echo "== libdagrt.so, instrumented"
cargo +nightly build -Zbuild-std --target "$host" --release --lib
lib_dir="$root/target/tsan/$host/release"

. scripts/need_commands.sh
need_commands cmake:cmake pkg-config:pkg-config c++:g++

echo "== capi-tests with -fsanitize=thread (build/capi-tsan)"
mkdir -p build/capi-tsan
cc -c -O1 capi-tests/sanitizer/tsan_mem_shim.c -o build/capi-tsan/tsan_mem_shim.o
cmake -S capi-tests -B build/capi-tsan -Ddagrt_DIR="$root/cmake" -DDAGRT_LIB_DIR="$lib_dir" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS="-fsanitize=thread" -DCMAKE_CXX_FLAGS="-fsanitize=thread" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread $root/build/capi-tsan/tsan_mem_shim.o"
cmake --build build/capi-tsan --parallel "$(nproc 2>/dev/null || echo 2)"
ctest --test-dir build/capi-tsan --output-on-failure -L '^capi$' -E '^test_limits$' --timeout 300
echo "== ThreadSanitizer: no reports"
