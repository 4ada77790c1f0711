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

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR riscv64)

set(GMP_CROSS_TRIPLE riscv64-linux-gnu)
set(CMAKE_C_COMPILER ${GMP_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${GMP_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${GMP_CROSS_TRIPLE})

set(GMP_CROSS_SYSROOT /usr/${GMP_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH ${GMP_CROSS_SYSROOT})
# Programs (valgrind, go) are the build machine's; libraries and headers
# may be in the sysroot or in a prefix named by CMAKE_PREFIX_PATH.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config must describe riscv64 packages, not the build machine's;
# there are none but those under CMAKE_PREFIX_PATH, which find_library
# and find_path find without it.
set(ENV{PKG_CONFIG_LIBDIR}
    "/usr/lib/${GMP_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig")

#
# The emulated processor is qemu's generic RV64GC (-cpu rv64, which .ci/run
# also sets in QEMU_CPU): no vector extension, whose state qemu-user 7.2
# does not put in signal frames.
find_program(GMP_QEMU_RISCV64 NAMES qemu-riscv64 qemu-riscv64-static)
if(GMP_QEMU_RISCV64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${GMP_QEMU_RISCV64} -cpu rv64
      -L ${GMP_CROSS_SYSROOT})
endif()
