# Cross build for 64-bit Arm Linux with Debian's cross toolchain, tests run
# under qemu-user. On Debian/Ubuntu:
#
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install gcc-aarch64-linux-gnu qemu-user libcmocka-dev:arm64
#   cmake -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#   cmake --build build-arm64 -j && ctest --test-dir build-arm64
#
# The compiler links against its own sysroot (/usr/aarch64-linux-gnu);
# cmocka comes from the multiarch package (/usr/lib/aarch64-linux-gnu,
# header in /usr/include). ctest runs every test through
# CMAKE_CROSSCOMPILING_EMULATOR.

set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(GMP_CROSS_TRIPLE aarch64-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/cross-linux-gnu.cmake)

# At run time the programs load the arm64 libc of the multiarch package
# libc6:arm64 (pulled in by libcmocka0:arm64) from /lib, like the cmocka
# they link. Only without it does qemu take loader and libc from the cross
# sysroot (-L): Debian 12's libc6-arm64-cross (2.36-8cross1) hangs inside
# pthread_create under its qemu-user 7.2, while the multiarch libc runs.
#
# The emulated processor has no SVE or SME (QEMU_CPU=max,sve=off,sme=off,
# which .ci/run and bench/run.sh also set): qemu-user keeps SVE state across
# system calls, where Linux discards it, so a thread that once ran glibc's
# SVE string routines would keep predicate registers live forever, and the
# preemption handler (src/preempt.c) never preempts over live SVE state.
find_program(GMP_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(GMP_QEMU_AARCH64)
  set(GMP_QEMU_CPU -cpu max,sve=off,sme=off)
  if(EXISTS /lib/ld-linux-aarch64.so.1)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${GMP_QEMU_AARCH64} ${GMP_QEMU_CPU})
  else()
    set(CMAKE_CROSSCOMPILING_EMULATOR ${GMP_QEMU_AARCH64} ${GMP_QEMU_CPU}
        -L ${GMP_CROSS_SYSROOT})
  endif()
endif()
