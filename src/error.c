/*
 * error.c - names for the error codes.
 */
#include <string.h>

#include "runtime.h"

const char *gmp_strerror(int err)
{
    switch (err) {
    case 0:             return "success";
    case GMP_EINVAL:    return "invalid argument";
    case GMP_ENOMEM:    return "out of memory";
    case GMP_EAGAIN:    return "resource temporarily unavailable";
    case GMP_ETIMEDOUT: return "timed out";
    case GMP_EPERM:     return "operation not permitted in this state";
    case GMP_EBUSY:     return "busy";
    case GMP_EBADF:     return "bad file descriptor";
    case GMP_ECLOSED:   return "channel closed";
    default:
        break;
    }
    /* Any other negative errno value: strerror's static table entries are
     * constant for known codes. */
    if (err < 0 && err > -4096)
        return strerror(-err);
    return "unknown error";
}
