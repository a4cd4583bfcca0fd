#!/usr/bin/env bash
# ctest `header_standalone`: a translation unit that includes only dagrt.h (twice, to exercise
# the include guard) compiles cleanly as C99, C11 and C++11 with -Wall -Wextra -Werror -pedantic.
#   check_header_standalone.sh <include dir> <C compiler> <C++ compiler>
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 <include dir> <cc> <c++>" >&2; exit 2; }
inc="$1" cc="$2" cxx="$3"
[ -f "$inc/dagrt.h" ] || { echo "FAIL: $inc/dagrt.h does not exist"; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
printf '#include <dagrt.h>\n#include <dagrt.h>\n' > "$tmp/tu.c"
cp "$tmp/tu.c" "$tmp/tu.cpp"

flags=(-Wall -Wextra -Werror -pedantic -I "$inc" -c)
fail=0
run() { # <label> <command...>
    local label="$1"; shift
    if "$@" > "$tmp/out" 2>&1; then
        echo "ok   $label"
    else
        echo "FAIL $label: $*"
        sed 's/^/    /' "$tmp/out"
        fail=1
    fi
}
run "C99"   "$cc"  -std=c99   "${flags[@]}" "$tmp/tu.c"   -o "$tmp/c99.o"
run "C11"   "$cc"  -std=c11   "${flags[@]}" "$tmp/tu.c"   -o "$tmp/c11.o"
run "C++11" "$cxx" -std=c++11 "${flags[@]}" "$tmp/tu.cpp" -o "$tmp/cxx11.o"
exit "$fail"
