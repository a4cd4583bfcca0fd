#!/usr/bin/env bash
# ctest `native_static_libs`: cmake/native-static-libs.txt (what dagrt::dagrt_static and
# dagrt.pc's Libs.private add to a static link) equals what this rustc says a staticlib needs.
# std decides that list (dagrt's own dependencies add no native library), so an empty
# staticlib built by the same toolchain is a fast stand-in for the full
#   cargo rustc --release --lib --crate-type staticlib -- --print native-static-libs
#   check_native_static_libs.sh <rustc> <repo root>
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 <rustc> <repo root>" >&2; exit 2; }
rustc="$1" root="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo 'pub fn f() -> u32 { 1 }' > "$tmp/lib.rs"
# Run from the repo root so a rust-toolchain file there selects the same toolchain as cargo.
(cd "$root" && "$rustc" --crate-type staticlib --crate-name native_libs_probe --edition 2021 \
    --print native-static-libs -o "$tmp/libprobe.a" "$tmp/lib.rs") > "$tmp/out" 2>&1 \
    || { cat "$tmp/out"; echo "FAIL: rustc failed"; exit 1; }
actual="$(sed -n 's/^note: native-static-libs: //p' "$tmp/out")"
listed="$(grep -E '^-l' "$root/cmake/native-static-libs.txt" | head -n 1)"
echo "rustc ($("$rustc" --version)): $actual"
echo "cmake/native-static-libs.txt: $listed"
if [ -z "$actual" ] || [ "$actual" != "$listed" ]; then
    echo "FAIL: update cmake/native-static-libs.txt"
    exit 1
fi
echo "native_static_libs: ok"
