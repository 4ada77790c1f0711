# Native build against musl libc with musl-gcc, the wrapper of Debian's
# and Ubuntu's musl-tools, dynamically linked, or fully static with
# -DGMP_STATIC_PROGRAMS=ON. cmocka must be built for musl too (Debian
# packages it for glibc only): .ci/cmocka builds it from Debian's
# source package into a prefix, named here with CMAKE_PREFIX_PATH:
#
#   apt-get install musl-tools dpkg-dev    # and a deb-src line for main
#   .ci/cmocka cmake/musl.cmake build-musl/cmocka
#   cmake -B build-musl -DCMAKE_TOOLCHAIN_FILE=cmake/musl.cmake \
#         -DCMAKE_PREFIX_PATH=$PWD/build-musl/cmocka [-DGMP_STATIC_PROGRAMS=ON]
#   cmake --build build-musl -j && ctest --test-dir build-musl
#
# Not a cross build: the programs run here, so every test runs. musl-gcc
# searches only musl's headers and libraries; packages found with
# pkg-config or find_library must be musl's too, not the build machine's
# glibc ones, which would link and then fail to load: neither looks in
# the glibc multiarch directories. The real libraries' tests (hiredis,
# libcurl, libpq, libgc, Lua) are then reported skipped.

set(CMAKE_C_COMPILER musl-gcc)

execute_process(COMMAND gcc -dumpmachine
  OUTPUT_VARIABLE GMP_GLIBC_TRIPLE OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_QUIET)
if(GMP_GLIBC_TRIPLE)
  list(APPEND CMAKE_SYSTEM_IGNORE_PATH
    /usr/lib/${GMP_GLIBC_TRIPLE} /lib/${GMP_GLIBC_TRIPLE})
  string(REPLACE "-gnu" "-musl" GMP_MUSL_TRIPLE "${GMP_GLIBC_TRIPLE}")
  set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${GMP_MUSL_TRIPLE}/pkgconfig")
endif()
