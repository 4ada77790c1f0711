/* Built with -fplt: the call below goes through a PLT stub, which
 * cmake/check_text.cmake must refuse in the runtime's object. */
#include <stdlib.h>

void *check_text_plt_call(size_t n)
{
    return malloc(n);
}
