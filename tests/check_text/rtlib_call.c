/* A 128-bit division calls a helper of the compiler's runtime library
 * (__divti3), which cmake/check_text.cmake must refuse in the runtime's
 * object. */
__int128 check_text_rtlib_call(__int128 a, __int128 b)
{
    return a / b;
}
