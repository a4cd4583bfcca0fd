#!/usr/bin/env bash
# The main job: the tiled Cholesky showcase (examples/cholesky) with default settings.
#
#   scripts/showcase.sh [dagrt_cholesky options...]     e.g. --reps 3, -n 4096 -b 256,
#                                                       --trace trace.json, --help
#
# On a fresh Debian machine (root; Rust toolchain, gcc and Python present) it installs what is
# missing with apt-get (cmake, pkg-config, libopenblas-dev, liblapacke-dev), runs
# `cargo build --release`, configures and builds examples/cholesky in build/cholesky against
# this build tree (-Ddagrt_DIR=<repo>/cmake), and runs it with OPENBLAS_NUM_THREADS=1, passing
# its arguments through. The exit status is the example's: 0 ok, 1 usage or setup error,
# 2 the factorization check failed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { echo "== showcase: $*" >&2; }

command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install the Rust toolchain first" >&2; exit 1; }
. scripts/need_commands.sh
if ! command -v dpkg-query >/dev/null 2>&1; then
    # Not Debian: OpenBLAS and LAPACKE are left to the example's CMake, which names what it
    # cannot find.
    say "no dpkg-query: not checking for OpenBLAS and LAPACKE packages"
fi
# shellcheck disable=SC2207 # package names: one word each
missing=($(missing_for_commands cmake:cmake pkg-config:pkg-config cc:gcc)
    $(missing_packages libopenblas-dev liblapacke-dev))
APT_QUIET=1 apt_install ${missing[@]+"${missing[@]}"} >&2 || exit 1

say "cargo build --release"
cargo build --release

say "building examples/cholesky in build/cholesky"
cmake -S examples/cholesky -B build/cholesky -Ddagrt_DIR="$root/cmake" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
# On stderr, with the other build output (cargo's): stdout is the example's alone, for a caller
# that keeps it (`scripts/showcase.sh --reps 3 > result.txt`). Compiler errors stay in sight.
cmake --build build/cholesky >&2

say "build/cholesky/dagrt_cholesky $*"
export OPENBLAS_NUM_THREADS=1
exec build/cholesky/dagrt_cholesky "$@"
