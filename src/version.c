/*
 * version.c - the library's version, for a program that wants to know which
 * libgmprt it runs against (the GMPRT_VERSION* macros of include/gmprt.h say
 * which header it was built with). Both come from the header as the library
 * was built; CMakeLists.txt checks that it matches project(VERSION).
 */
#include "gmprt.h"

const char *gmp_runtime_version(void)
{
    return GMPRT_VERSION;
}

int gmp_runtime_version_number(void)
{
    return GMPRT_VERSION_NUMBER;
}
