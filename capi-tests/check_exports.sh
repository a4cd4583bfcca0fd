#!/usr/bin/env bash
# ctest `exports`: the dynamic symbol table of libdagrt.so and the header agree.
#   check_exports.sh <libdagrt.so> <dagrt.h> <C compiler>
# 1. every defined dynamic symbol of the library starts with dagrt_ (nothing internal leaks);
# 2. every exported dagrt_ function is declared in the header;
# 3. every function declared in the header is exported.
# Header declarations are read from the preprocessed header (comments and macros gone).
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 <libdagrt.so> <dagrt.h> <cc>" >&2; exit 2; }
lib="$1" header="$2" cc="$3"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# "<value> <type> <name>[@version]"; absolute (A) entries are version nodes, not symbols.
nm -D --defined-only "$lib" | awk 'NF >= 3 && $2 != "A" { sub(/@.*/, "", $3); print $2, $3 }' \
    | sort -u > "$tmp/dynsyms"
awk '$1 ~ /^[TtWi]$/ { print $2 }' "$tmp/dynsyms" | sort -u > "$tmp/exported_functions"

"$cc" -E -P -x c "$header" > "$tmp/header.i"
tr '\n' ' ' < "$tmp/header.i" \
    | grep -oE '[A-Za-z0-9_]+[[:space:]*]+dagrt_[A-Za-z0-9_]*[[:space:]]*\(' \
    | sed -E 's/.*(dagrt_[A-Za-z0-9_]*)[[:space:]]*\($/\1/' | sort -u > "$tmp/declared" || true

n_exported=$(wc -l < "$tmp/exported_functions")
n_declared=$(wc -l < "$tmp/declared")
echo "exports: $lib defines $(wc -l < "$tmp/dynsyms") dynamic symbols, $n_exported functions;" \
     "$header declares $n_declared functions"
fail=0
if [ "$n_exported" -eq 0 ] || [ "$n_declared" -eq 0 ]; then
    echo "FAIL: nothing to compare (nm or header parsing found no functions)"
    fail=1
fi

unprefixed="$(awk '$2 !~ /^dagrt_/ { print "  " $1 " " $2 }' "$tmp/dynsyms")"
if [ -n "$unprefixed" ]; then
    echo "FAIL: exported symbols without the dagrt_ prefix:"
    echo "$unprefixed"
    fail=1
fi
undeclared="$(comm -23 "$tmp/exported_functions" "$tmp/declared")"
if [ -n "$undeclared" ]; then
    echo "FAIL: exported but not declared in the header:"
    echo "$undeclared" | sed 's/^/  /'
    fail=1
fi
unexported="$(comm -13 "$tmp/exported_functions" "$tmp/declared")"
if [ -n "$unexported" ]; then
    echo "FAIL: declared in the header but not exported by the library:"
    echo "$unexported" | sed 's/^/  /'
    fail=1
fi
[ "$fail" -eq 0 ] && echo "exports: ok"
exit "$fail"
