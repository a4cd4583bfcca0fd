#!/usr/bin/env bash
# ctests example.cholesky_build_tree / example.cholesky_build_installed: configure and build
# examples/cholesky as a project of its own (its CMakeLists.txt, find_package(dagrt 0.1)),
# then run the binary on a small matrix.
#
#   check_builds.sh tree    --work DIR --cmake CMAKE --cc CC --dagrt-dir <repo>/cmake [--lib-dir DIR]
#   check_builds.sh install --work DIR --cmake CMAKE --cc CC [--lib-dir DIR]
#
# tree:    -Ddagrt_DIR=<dagrt-dir> (the build-tree package; DAGRT_LIB_DIR=<lib-dir> if given)
# install: scripts/install.sh --prefix DIR/prefix (installing the libraries of <lib-dir>, no
#          cargo run, when given), then -DCMAKE_PREFIX_PATH=DIR/prefix only; the binary must
#          load libdagrt from that prefix.
set -euo pipefail

mode="${1:-}"; shift || true
work="" cmake="cmake" cc="cc" dagrt_dir="" libdir=""
while [ $# -gt 0 ]; do
    case "$1" in
        --work) work="$2"; shift 2 ;;
        --cmake) cmake="$2"; shift 2 ;;
        --cc) cc="$2"; shift 2 ;;
        --dagrt-dir) dagrt_dir="$2"; shift 2 ;;
        --lib-dir) libdir="$2"; shift 2 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
[ -n "$work" ] || { echo "--work DIR is required" >&2; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
die() { echo "FAIL: $*"; exit 1; }
unset dagrt_DIR dagrt_ROOT CMAKE_PREFIX_PATH LD_LIBRARY_PATH
rm -rf "$work"
mkdir -p "$work"
work="$(cd "$work" && pwd)"

case "$mode" in
    tree)
        [ -n "$dagrt_dir" ] || die "--dagrt-dir is required for 'tree'"
        args=(-Ddagrt_DIR="$dagrt_dir")
        [ -z "$libdir" ] || args+=(-DDAGRT_LIB_DIR="$libdir")
        ;;
    install)
        echo "=== scripts/install.sh --prefix $work/prefix${libdir:+ (DAGRT_LIB_DIR=$libdir)}"
        if [ -n "$libdir" ]; then
            DAGRT_LIB_DIR="$libdir" "$root/scripts/install.sh" --prefix "$work/prefix"
        else
            env -u DAGRT_LIB_DIR "$root/scripts/install.sh" --prefix "$work/prefix"
        fi
        args=(-DCMAKE_PREFIX_PATH="$work/prefix")
        ;;
    *) echo "usage: $0 tree|install --work DIR ..." >&2; exit 2 ;;
esac

echo "=== configure examples/cholesky (${args[*]})"
"$cmake" -S "$here" -B "$work/build" -DCMAKE_C_COMPILER="$cc" "${args[@]}"
found="$(sed -n 's/^dagrt_DIR:[A-Z]*=//p' "$work/build/CMakeCache.txt")"
echo "dagrt_DIR = $found"
if [ "$mode" = install ]; then
    [ "$(readlink -f "$found")" = "$(readlink -f "$work/prefix/lib/cmake/dagrt")" ] \
        || die "found dagrt in '$found', not in the installed prefix"
else
    [ "$(readlink -f "$found")" = "$(readlink -f "$dagrt_dir")" ] \
        || die "found dagrt in '$found', not in $dagrt_dir"
fi
echo "=== build"
"$cmake" --build "$work/build"
exe="$work/build/dagrt_cholesky"
[ -x "$exe" ] || die "$exe was not built"
if [ "$mode" = install ]; then
    lib="$(ldd "$exe" | awk '$1 ~ /^libdagrt\.so/ { print $3 }')"
    case "$(readlink -f "$lib")" in
        "$(readlink -f "$work/prefix")"/lib/*) echo "libdagrt -> $lib" ;;
        *) die "$exe loads libdagrt from '$lib', not from $work/prefix/lib" ;;
    esac
fi
echo "=== run"
"$exe" -n 256 -b 64 --reps 2 --no-progress
