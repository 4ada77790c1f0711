#!/bin/sh
# run.sh - install a built gmprt into a fresh prefix and build a user's
# program against it every way a user would, then run each build:
#   1. CMake: find_package(gmprt), one executable for each of gmprt::gmprt,
#      gmprt::gmprt_shared and gmprt::gmprt_static (consumer/);
#   2. pkg-config: `cc $(pkg-config --cflags --libs gmprt)` (shared);
#   3. pkg-config --static, linking libgmprt.a.
# It also checks the installed tree: files in place, SONAME, and that the
# shared library exports only public gmp_ names. ctest runs it (test
# `install`, tests/CMakeLists.txt); it writes under WORK only.
#
# usage: run.sh BUILD WORK CMAKE CC GENERATOR [PKG_CONFIG]
#   BUILD: gmprt's build directory, already built; WORK: scratch directory
#   (emptied); CMAKE, CC, GENERATOR: as gmprt was configured with;
#   PKG_CONFIG: the pkg-config program, empty to skip steps 2 and 3
#   (the test is then reported skipped, exit 77).
set -eu

build=$1 work=$2 cmake=$3 cc=$4 generator=$5 pkgconfig=${6:-}
here=$(cd "$(dirname "$0")" && pwd)
prefix=$work/prefix

fail() { echo "install test: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

# NEEDED entries of an ELF file, one per line.
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

rm -rf "$work"
mkdir -p "$work"

step "cmake --install into $prefix"
"$cmake" --install "$build" --prefix "$prefix"
(cd "$prefix" && find . ! -type d | sort)

pc=$(find "$prefix" -name gmprt.pc -path '*/pkgconfig/*')
[ -n "$pc" ] || fail "no gmprt.pc installed"
libdir=$(dirname "$(dirname "$pc")")
version=$(sed -n 's/^Version: //p' "$pc")
major=${version%%.*}
for f in "$prefix/include/gmprt.h" "$libdir/libgmprt.a" \
         "$libdir/libgmprt.so" "$libdir/libgmprt.so.$major" \
         "$libdir/libgmprt.so.$version" \
         "$libdir/cmake/gmprt/gmprtConfig.cmake" \
         "$libdir/cmake/gmprt/gmprtConfigVersion.cmake" \
         "$libdir/cmake/gmprt/gmprtTargets.cmake"; do
    [ -e "$f" ] || fail "missing $f"
done

step "libgmprt.so: SONAME and exported names"
so=$libdir/libgmprt.so.$version
readelf -d "$so" | grep -q "(SONAME).*\[libgmprt\.so\.$major\]" ||
    fail "SONAME of $so is not libgmprt.so.$major"
nm -D --defined-only "$so" | awk '{ print $NF }' > "$work/exports"
n=$(wc -l < "$work/exports")
# One private entry besides the API: the hook library's (src/libc.h). And
# with musl, whose start files (crti.o) define them global, _init and _fini.
bad=$(grep -v '^gmp_[a-z]' "$work/exports" |
      grep -vx -e gmp__libc_attach -e _init -e _fini || true)
[ -z "$bad" ] || fail "exports non-public names: $bad"
grep -qx gmp_runtime_version "$work/exports" ||
    fail "gmp_runtime_version not exported"
echo "$n exported names, all gmp_*"

step "CMake consumer (find_package(gmprt))"
"$cmake" -S "$here/consumer" -B "$work/cmake" -G "$generator" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix"
# It must have found ours, not some other installed gmprt.
grep -q "^gmprt_DIR:PATH=$libdir/cmake/gmprt\$" "$work/cmake/CMakeCache.txt" ||
    fail "find_package(gmprt) found $(grep '^gmprt_DIR' \
        "$work/cmake/CMakeCache.txt"), not the one in $prefix"
"$cmake" --build "$work/cmake"
for t in gmprt gmprt_shared gmprt_static hook; do
    exe=$work/cmake/consumer_$t
    if [ $t = hook ]; then
        needed "$exe" | grep -qx "libgmprt_hook.so.$major" ||
            fail "$exe does not need libgmprt_hook.so.$major"
    elif [ $t = gmprt_static ]; then
        ! needed "$exe" | grep -q libgmprt || fail "$exe needs libgmprt.so"
    else
        needed "$exe" | grep -qx "libgmprt.so.$major" ||
            fail "$exe does not need libgmprt.so.$major"
    fi
    "$exe" || fail "$exe exited $?"
done

if [ -z "$pkgconfig" ]; then
    echo "install test: pkg-config not found, its steps skipped"
    exit 77
fi
export PKG_CONFIG_PATH="$libdir/pkgconfig"

step "pkg-config consumer (shared)"
[ "$("$pkgconfig" --modversion gmprt)" = "$version" ] ||
    fail "pkg-config --modversion gmprt is not $version"
[ "$("$pkgconfig" --variable=prefix gmprt)" = "$prefix" ] ||
    fail "gmprt.pc's prefix is not $prefix (filled in at install time)"
cflags=$("$pkgconfig" --cflags gmprt)
libs=$("$pkgconfig" --libs gmprt)
echo "cflags: $cflags"
echo "libs: $libs"
# shellcheck disable=SC2086  # word splitting of the flags is meant
"$cc" -Wall -Wextra -Werror $cflags -o "$work/pc_shared" \
    "$here/consumer/main.c" $libs
needed "$work/pc_shared" | grep -qx "libgmprt.so.$major" ||
    fail "pc_shared does not need libgmprt.so.$major"
LD_LIBRARY_PATH="$libdir" "$work/pc_shared" || fail "pc_shared exited $?"

step "pkg-config consumer of the hooks (gmprt-hook)"
hlibs=$("$pkgconfig" --libs gmprt-hook)
echo "libs: $hlibs"
# shellcheck disable=SC2086
"$cc" -Wall -Wextra -Werror $cflags -o "$work/pc_hook" \
    "$here/consumer/main.c" $hlibs
needed "$work/pc_hook" | grep -qx "libgmprt_hook.so.$major" ||
    fail "pc_hook does not need libgmprt_hook.so.$major"
LD_LIBRARY_PATH="$libdir" "$work/pc_hook" || fail "pc_hook exited $?"

step "pkg-config --static consumer (libgmprt.a)"
# -l:libgmprt.a: the archive even though libgmprt.so lies beside it; the
# rest of the line (Libs.private) must be all the archive needs.
slibs=$("$pkgconfig" --libs --static gmprt)
echo "libs --static: $slibs"
# shellcheck disable=SC2086
"$cc" -Wall -Wextra -Werror $cflags -o "$work/pc_static" \
    "$here/consumer/main.c" $(echo "$slibs" | sed 's/-lgmprt\b/-l:libgmprt.a/')
! needed "$work/pc_static" | grep -q libgmprt || fail "pc_static needs libgmprt.so"
"$work/pc_static" || fail "pc_static exited $?"

echo "install test: ok"
