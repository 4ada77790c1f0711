# Cross build for 64-bit RISC-V Linux (RV64GC, LP64D) with Debian's cross
# toolchain, tests run under qemu-user. On Debian/Ubuntu:
#
#   apt-get install gcc-riscv64-linux-gnu libc6-dev-riscv64-cross qemu-user
#   .ci/cmocka cmake/riscv64-linux-gnu.cmake build-riscv64/cmocka
#   cmake -B build-riscv64 -DCMAKE_TOOLCHAIN_FILE=cmake/riscv64-linux-gnu.cmake \
#         -DCMAKE_PREFIX_PATH=$PWD/build-riscv64/cmocka
#   cmake --build build-riscv64 -j && ctest --test-dir build-riscv64
#
# The compiler links against its own sysroot (/usr/riscv64-linux-gnu), and
# qemu takes the loader and libc from there too (-L): Debian 12 has no
# riscv64 multiarch packages. Nor has it a riscv64 cmocka: .ci/cmocka
# builds one from Debian's source package with this file into a prefix,
# which CMAKE_PREFIX_PATH then names (the tests' run path points there).
# ctest runs every test through CMAKE_CROSSCOMPILING_EMULATOR.

set(CMAKE_SYSTEM_PROCESSOR riscv64)
set(GMP_CROSS_TRIPLE riscv64-linux-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/cross-linux-gnu.cmake)

# The emulated processor is qemu's generic RV64GC (-cpu rv64, which .ci/run
# also sets in QEMU_CPU): no vector extension, whose state qemu-user 7.2
# does not put in signal frames.
find_program(GMP_QEMU_RISCV64 NAMES qemu-riscv64 qemu-riscv64-static)
if(GMP_QEMU_RISCV64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${GMP_QEMU_RISCV64} -cpu rv64
      -L ${GMP_CROSS_SYSROOT})
endif()
