#!/usr/bin/env bash
# Install dagrt (shared + static library, header, CMake package, pkg-config file).
#
#   scripts/install.sh --prefix <dir> [--no-build]
#
# Layout under <dir>:
#   lib/libdagrt.so.X.Y.Z, lib/libdagrt.so.X -> libdagrt.so.X.Y.Z, lib/libdagrt.so -> libdagrt.so.X
#   lib/libdagrt.a
#   include/dagrt.h
#   lib/cmake/dagrt/{dagrtConfig,dagrtConfigVersion,dagrtTargets}.cmake   (relocatable)
#   lib/pkgconfig/dagrt.pc
#
# By default runs `cargo build --release` first (a no-op when the build is fresh) and installs
# from $CARGO_TARGET_DIR/release or <repo>/target/release. Environment:
#   DAGRT_LIB_DIR  install the libdagrt.so/libdagrt.a found there; never runs cargo
#   DESTDIR        staging root for packagers: files go to $DESTDIR<dir>, paths inside them say <dir>
set -euo pipefail

die() { echo "install.sh: error: $*" >&2; exit 1; }
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }

prefix=""
build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) [ $# -ge 2 ] || die "--prefix needs a directory"; prefix="$2"; shift 2 ;;
        --prefix=*) prefix="${1#--prefix=}"; shift ;;
        --no-build) build=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done
[ -n "$prefix" ] || { usage >&2; die "--prefix <dir> is required"; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
destdir="${DESTDIR:-}"
if [ -z "$destdir" ]; then
    mkdir -p "$prefix"
    prefix="$(cd "$prefix" && pwd)"
else
    case "$prefix" in /*) ;; *) die "with DESTDIR, --prefix must be absolute" ;; esac
fi
dest="${destdir}${prefix}"
libdir_name=lib

# --- version: single source, the [package] version in Cargo.toml ---------------------------
version="$(awk '
    /^[ \t]*\[/ { section = $0; sub(/^[ \t]*\[[ \t]*/, "", section); sub(/[ \t]*\].*$/, "", section); next }
    section == "package" && /^[ \t]*version[ \t]*=/ {
        line = $0; sub(/^[^"]*"/, "", line); sub(/".*$/, "", line); print line; exit
    }' "$root/Cargo.toml")"
[[ "$version" =~ ^([0-9]+)\.([0-9]+)\.([0-9]+) ]] || die "cannot read [package] version from $root/Cargo.toml (got '$version')"
major="${BASH_REMATCH[1]}"
# The ABI version (build.rs): the major from 1.0 on, major.minor below it.
abi="$major"
[ "$major" = 0 ] && abi="0.${BASH_REMATCH[2]}"
soname="libdagrt.so.${abi}"

header="$root/include/dagrt.h"
[ -f "$header" ] || die "$header is missing"
grep -q "^#define DAGRT_VERSION_STRING \"${version}\"" "$header" \
    || die "$header does not say DAGRT_VERSION_STRING \"$version\" (Cargo.toml): regenerate the header"

# --- locate (and build) the libraries -------------------------------------------------------
if [ -n "${DAGRT_LIB_DIR:-}" ]; then
    libsrc="$DAGRT_LIB_DIR"
else
    target_dir="${CARGO_TARGET_DIR:-target}"
    case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
    libsrc="$target_dir/release"
    if [ "$build" = 1 ]; then
        if command -v cargo >/dev/null 2>&1; then
            echo "install.sh: cargo build --release (in $root)"
            (cd "$root" && cargo build --release)
        elif [ ! -f "$libsrc/libdagrt.so" ]; then
            die "cargo not found and $libsrc/libdagrt.so does not exist"
        fi
    fi
fi
for f in libdagrt.so libdagrt.a; do
    [ -f "$libsrc/$f" ] || die "$libsrc/$f does not exist: run \`cargo build --release\` in $root first"
done

command -v readelf >/dev/null 2>&1 || die "readelf (binutils) is needed to check the SONAME"
lib_soname="$(readelf -d "$libsrc/libdagrt.so" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')"
[ "$lib_soname" = "$soname" ] \
    || die "$libsrc/libdagrt.so has SONAME '$lib_soname', expected '$soname' (see build.rs)"
# dagrt_version() returns the crate version as a C string: a library from another version (a
# stale build, a DAGRT_LIB_DIR left over) must not be installed under this one's name.
for f in libdagrt.so libdagrt.a; do
    LC_ALL=C grep -aqP "(?<![0-9.])${version//./\\.}\\x00" "$libsrc/$f" \
        || die "$libsrc/$f does not hold version $version (a stale build?): rebuild it"
done

case "$(od -An -tx1 -j4 -N1 "$libsrc/libdagrt.so" | tr -d ' \n')" in
    01) sizeof_void_p=4 ;;
    02) sizeof_void_p=8 ;;
    *) die "$libsrc/libdagrt.so is not an ELF file" ;;
esac

native_flags="$(grep -E '^-l' "$root/cmake/native-static-libs.txt" | head -n 1)"
[ -n "$native_flags" ] || die "no native libraries listed in $root/cmake/native-static-libs.txt"
native_libs="$(printf '%s\n' $native_flags | sed 's/^-l//' | paste -sd ';' -)"

# --- install ---------------------------------------------------------------------------------
sed_escape() { printf '%s' "$1" | sed -e 's/[\\&|]/\\&/g'; }
configure() { # <template> <output>
    local tmp="$2.tmp.$$"
    sed -e "s|@DAGRT_PKG_VERSION@|$(sed_escape "$version")|g" \
        -e "s|@DAGRT_PKG_SONAME@|$(sed_escape "$soname")|g" \
        -e "s|@DAGRT_PKG_LIBDIR@|$(sed_escape "$libdir_name")|g" \
        -e "s|@DAGRT_PKG_NATIVE_LIBS@|$(sed_escape "$native_libs")|g" \
        -e "s|@DAGRT_PKG_NATIVE_FLAGS@|$(sed_escape "$native_flags")|g" \
        -e "s|@DAGRT_PKG_SIZEOF_VOID_P@|$(sed_escape "$sizeof_void_p")|g" \
        "$1" > "$tmp"
    if grep -n '@DAGRT_PKG_[A-Z_]*@' "$tmp" >&2; then
        rm -f "$tmp"; die "unsubstituted placeholder in $1"
    fi
    mv -f "$tmp" "$2"
}
copy() { # <mode> <src> <dst>: copy to a temporary name, then rename (safe for a loaded .so)
    local tmp="$3.tmp.$$"
    cp -L "$2" "$tmp" && chmod "$1" "$tmp" && mv -f "$tmp" "$3"
}

L="$dest/$libdir_name"
mkdir -p "$L" "$dest/include" "$L/cmake/dagrt" "$L/pkgconfig"

copy 755 "$libsrc/libdagrt.so" "$L/libdagrt.so.$version"
ln -sfn "libdagrt.so.$version" "$L/$soname"
ln -sfn "$soname" "$L/libdagrt.so"
copy 644 "$libsrc/libdagrt.a" "$L/libdagrt.a"
copy 644 "$header" "$dest/include/dagrt.h"

configure "$root/cmake/dagrtConfig.cmake.in" "$L/cmake/dagrt/dagrtConfig.cmake"
configure "$root/cmake/dagrtConfigVersion.cmake.in" "$L/cmake/dagrt/dagrtConfigVersion.cmake"
copy 644 "$root/cmake/dagrtTargets.cmake" "$L/cmake/dagrt/dagrtTargets.cmake"
configure "$root/cmake/dagrt.pc.in" "$L/pkgconfig/dagrt.pc"

echo "install.sh: installed dagrt $version into $dest"
for f in "$libdir_name/libdagrt.so.$version" "$libdir_name/$soname" "$libdir_name/libdagrt.so" \
         "$libdir_name/libdagrt.a" include/dagrt.h "$libdir_name/cmake/dagrt/dagrtConfig.cmake" \
         "$libdir_name/cmake/dagrt/dagrtConfigVersion.cmake" "$libdir_name/cmake/dagrt/dagrtTargets.cmake" \
         "$libdir_name/pkgconfig/dagrt.pc"; do
    echo "  $f"
done
