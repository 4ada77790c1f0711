# What the cross toolchain files (aarch64-linux-gnu.cmake,
# riscv64-linux-gnu.cmake) share: Debian's cross compiler for
# GMP_CROSS_TRIPLE, which the including file sets first, its sysroot
# (GMP_CROSS_SYSROOT), and where find_* look.

set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_C_COMPILER ${GMP_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${GMP_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${GMP_CROSS_TRIPLE})

set(GMP_CROSS_SYSROOT /usr/${GMP_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH ${GMP_CROSS_SYSROOT})
# Programs (valgrind, go) are the build machine's; libraries and headers
# may be in the sysroot, in the multiarch directories of /usr, or in a
# prefix named by CMAKE_PREFIX_PATH.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config must describe the target's packages, not the build
# machine's.
set(ENV{PKG_CONFIG_LIBDIR}
    "/usr/lib/${GMP_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig")
