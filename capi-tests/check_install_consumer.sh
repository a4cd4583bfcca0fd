#!/usr/bin/env bash
# ctest `install_consumer`: install dagrt with scripts/install.sh into <work>/prefix, then build
# and run capi-tests/consumer against that prefix only:
#   1. CMake: find_package(dagrt 0.1 REQUIRED) with -DCMAKE_PREFIX_PATH=<prefix>; both the shared
#      (dagrt::dagrt) and the static (dagrt::dagrt_static) consumer;
#   2. pkg-config: cc main.c $(pkg-config --cflags --libs dagrt), rpath to <prefix>/lib;
#   3. pkg-config static: -Wl,-Bstatic -ldagrt + `pkg-config --static --libs` (Libs.private);
#   4. the prefix moved elsewhere: pkg-config and CMake consumers still build and run;
#   5. find_package with a required component (dagrt has none) is not found, with a message;
#   6. install.sh refuses libraries whose embedded version is not the checkout's (stale).
# Every step must succeed, each binary must load libdagrt from <prefix> (or not at all when
# static), and each must exit 0.
#
#   check_install_consumer.sh --work <dir> --cmake <cmake> --cc <C compiler> [--lib-dir <dir>]
# --lib-dir is passed to install.sh as DAGRT_LIB_DIR (install those libraries, run no cargo).
set -euo pipefail

work="" cmake="cmake" cc="cc" libdir=""
while [ $# -gt 0 ]; do
    case "$1" in
        --work) work="$2"; shift 2 ;;
        --cmake) cmake="$2"; shift 2 ;;
        --cc) cc="$2"; shift 2 ;;
        --lib-dir) libdir="$2"; shift 2 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
[ -n "$work" ] || { echo "--work <dir> is required" >&2; exit 2; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
step() { echo; echo "=== install_consumer: $*"; }
die() { echo "FAIL: $*"; exit 1; }

# Only the prefix may provide dagrt: drop anything that could point elsewhere.
unset dagrt_DIR dagrt_ROOT DAGRT_ROOT CMAKE_PREFIX_PATH LD_LIBRARY_PATH PKG_CONFIG_PATH

rm -rf "$work"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
prefix="$work/prefix"

step "scripts/install.sh --prefix $prefix${libdir:+ (DAGRT_LIB_DIR=$libdir)}"
if [ -n "$libdir" ]; then
    DAGRT_LIB_DIR="$libdir" "$root/scripts/install.sh" --prefix "$prefix"
else
    env -u DAGRT_LIB_DIR "$root/scripts/install.sh" --prefix "$prefix"
fi
version="$(sed -n 's/^#define DAGRT_VERSION_STRING "\(.*\)"$/\1/p' "$prefix/include/dagrt.h")"
[ -n "$version" ] || die "no DAGRT_VERSION_STRING in $prefix/include/dagrt.h"

# <binary>: libdagrt.so.N must resolve to the installed copy.
expect_prefix_lib() {
    local resolved
    resolved="$(ldd "$1" | awk '$1 ~ /^libdagrt\.so/ { print $3 }')"
    [ -n "$resolved" ] || die "$1 does not load libdagrt"
    [ "$(readlink -f "$resolved")" = "$(readlink -f "$prefix/lib/libdagrt.so.$version")" ] \
        || die "$1 loads $resolved, not the installed $prefix/lib/libdagrt.so.$version"
    echo "$1: libdagrt -> $resolved"
}
# <binary>: must not need libdagrt at run time.
expect_static() {
    local dynamic
    dynamic="$(readelf -d "$1")"
    if grep -E 'NEEDED.*\[libdagrt' <<< "$dynamic"; then
        die "$1 was meant to be linked statically but needs libdagrt"
    fi
    echo "$1: no libdagrt.so dependency (static)"
}

step "CMake consumer: configure with -DCMAKE_PREFIX_PATH=$prefix"
"$cmake" -S "$here/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=RelWithDebInfo
found_dir="$(sed -n 's/^dagrt_DIR:PATH=//p' "$work/build/CMakeCache.txt")"
[ "$(readlink -f "$found_dir")" = "$(readlink -f "$prefix/lib/cmake/dagrt")" ] \
    || die "the consumer found dagrt in '$found_dir', not in $prefix/lib/cmake/dagrt"
echo "dagrt_DIR = $found_dir"

step "CMake consumer: build"
"$cmake" --build "$work/build"

step "CMake consumer: run (shared)"
expect_prefix_lib "$work/build/dagrt_consumer"
"$work/build/dagrt_consumer"

step "CMake consumer: run (static)"
expect_static "$work/build/dagrt_consumer_static"
"$work/build/dagrt_consumer_static"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
step "pkg-config: PKG_CONFIG_PATH=$PKG_CONFIG_PATH"
pc_version="$(pkg-config --modversion dagrt)"
[ "$pc_version" = "$version" ] || die "pkg-config says dagrt $pc_version, the header $version"
cflags="$(pkg-config --cflags dagrt)"
libs="$(pkg-config --libs dagrt)"
echo "version $pc_version; --cflags: $cflags; --libs: $libs"

step "pkg-config consumer: build and run (shared)"
# shellcheck disable=SC2086 # pkg-config output is a list of flags
"$cc" -std=c11 -Wall -Wextra -Werror "$here/consumer/main.c" $cflags $libs \
    -Wl,-rpath,"$prefix/lib" -o "$work/consumer_pc"
expect_prefix_lib "$work/consumer_pc"
"$work/consumer_pc"

step "pkg-config consumer: build and run (static, Libs.private)"
static_libs="$(pkg-config --static --libs-only-l dagrt | tr ' ' '\n' | grep -v -x -e '-ldagrt' -e '' | tr '\n' ' ')"
echo "Libs.private: $static_libs"
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror "$here/consumer/main.c" $cflags \
    $(pkg-config --libs-only-L dagrt) -Wl,-Bstatic -ldagrt -Wl,-Bdynamic $static_libs \
    -o "$work/consumer_pc_static"
expect_static "$work/consumer_pc_static"
"$work/consumer_pc_static"

# A moved prefix: the CMake package and dagrt.pc both find their files from where they are.
moved="$work/moved"
rm -rf "$moved"
mv "$prefix" "$moved"
step "moved prefix: pkg-config and CMake from $moved"
export PKG_CONFIG_PATH="$moved/lib/pkgconfig"
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror "$here/consumer/main.c" $(pkg-config --cflags --libs dagrt) \
    -Wl,-rpath,"$moved/lib" -o "$work/consumer_moved"
"$work/consumer_moved"
"$cmake" -S "$here/consumer" -B "$work/build_moved" -DCMAKE_PREFIX_PATH="$moved" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
"$cmake" --build "$work/build_moved" >/dev/null
"$work/build_moved/dagrt_consumer"
mv "$moved" "$prefix"

step "find_package(dagrt REQUIRED COMPONENTS nope): not found"
mkdir -p "$work/components"
printf '%s\n' 'cmake_minimum_required(VERSION 3.16)' 'project(c LANGUAGES C)' \
    'find_package(dagrt REQUIRED COMPONENTS nope)' > "$work/components/CMakeLists.txt"
if out="$("$cmake" -S "$work/components" -B "$work/components/build" \
        -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" 2>&1)"; then
    die "a required component dagrt does not have was found"
fi
grep -q "dagrt has no component 'nope'" <<< "$out" || die "no message naming the component: $out"

step "install.sh refuses a library of another version"
stale="$work/stale"
mkdir -p "$stale"
for f in libdagrt.so libdagrt.a; do
    # The same bytes but for the embedded version string (same length, so nothing else moves).
    VERSION="$version" perl -0777 -pe 's/\Q$ENV{VERSION}\E\x00/"9" x length($ENV{VERSION}) . "\x00"/ge' \
        "$prefix/lib/$( [ $f = libdagrt.so ] && echo "libdagrt.so.$version" || echo $f)" > "$stale/$f"
done
if out="$(DAGRT_LIB_DIR="$stale" "$root/scripts/install.sh" --prefix "$work/stale_prefix" 2>&1)"; then
    die "install.sh installed a library that is not dagrt $version"
fi
grep -q "does not hold version $version" <<< "$out" || die "unexpected refusal: $out"
echo "refused: $(tail -n 1 <<< "$out")"

echo
echo "install_consumer: ok"
