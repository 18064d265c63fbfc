// Project stand-in for the bounds-checked C library header the public
// metadef headers include (securec.h, from CANN's closed toolkit or the
// separate libboundscheck project). Only the functions those headers call.
#ifndef BNB_API_CHECK_SECUREC_H
#define BNB_API_CHECK_SECUREC_H
#include <cstddef>
#include <cstring>

#ifndef EOK
#define EOK 0
#endif
using errno_t = int;

inline errno_t memcpy_s(void *dest, size_t destMax, const void *src, size_t count)
{
    if (dest == nullptr || src == nullptr || count > destMax) {
        return 1;
    }
    std::memmove(dest, src, count);
    return EOK;
}
inline errno_t memset_s(void *dest, size_t destMax, int c, size_t count)
{
    if (dest == nullptr || count > destMax) {
        return 1;
    }
    std::memset(dest, c, count);
    return EOK;
}
#endif
