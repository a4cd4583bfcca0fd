#!/usr/bin/env bash
# Run the Rust tests (the library's unit tests and every integration test) under
# ThreadSanitizer: a nightly toolchain with rust-src (installed with rustup if missing), the
# standard library rebuilt instrumented (-Zbuild-std), build outputs in target/tsan. Any
# report fails the script. The soaks run shorter than their defaults under TSAN's 5-15x
# slowdown unless set: DAGRT_STRESS_RUNS (3000), DAGRT_FAULT_RUNS (2000), DAGRT_FUZZ_SEQS (300).
# Fork-based tests are skipped, as under `cargo test`. The loom models are not built here.
#
#   scripts/test-tsan.sh
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

command -v rustup >/dev/null 2>&1 || { echo "rustup is needed to install a nightly toolchain" >&2; exit 1; }
if ! rustup +nightly component list --installed 2>/dev/null | grep -q '^rust-src'; then
    echo "== installing the nightly toolchain with rust-src (rustup)"
    rustup toolchain install nightly --profile minimal -c rust-src
fi
host="$(rustc +nightly -vV | sed -n 's/^host: //p')"

export RUSTFLAGS="-Zsanitizer=thread"
export CARGO_TARGET_DIR=target/tsan
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}"
export DAGRT_STRESS_RUNS="${DAGRT_STRESS_RUNS:-3000}"
export DAGRT_FAULT_RUNS="${DAGRT_FAULT_RUNS:-2000}"
export DAGRT_FUZZ_SEQS="${DAGRT_FUZZ_SEQS:-300}"

# --target keeps the sanitizer off build scripts and proc macros (they run on the host).
echo "== cargo +nightly test -Zbuild-std --target $host --release --lib --tests (ThreadSanitizer)"
cargo +nightly test -Zbuild-std --target "$host" --release --lib --tests
echo "== ThreadSanitizer: no reports"
