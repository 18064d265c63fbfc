// Project stand-in for the header the CANN op build generates per operator
// (force-included into the kernel compile): GET_TILING_DATA for a kernel whose
// tiling is a plain struct registered with REGISTER_TILING_DEFAULT. The op
// build knows the struct from the registration; here the api_check build
// passes it as -DBNB_API_CHECK_TILING_STRUCT=... per kernel entry. CPU-debug
// form: the tiling bytes are copied out of GM into a local struct.
#ifndef BNB_API_CHECK_OP_TILING_MACROS_H
#define BNB_API_CHECK_OP_TILING_MACROS_H
#include <cstdint>
#include <cstring>

template <class T>
inline void BnbInitTilingData(const uint8_t *tiling, T *data)
{
    std::memcpy(static_cast<void *>(data), tiling, sizeof(T));
}

#define GET_TILING_DATA_WITH_STRUCT(tiling_struct, tiling_data, tiling_arg) \
    tiling_struct tiling_data;                                              \
    BnbInitTilingData<tiling_struct>(reinterpret_cast<const uint8_t *>(tiling_arg), &tiling_data)
#define GET_TILING_DATA(tiling_data, tiling_arg) \
    GET_TILING_DATA_WITH_STRUCT(BNB_API_CHECK_TILING_STRUCT, tiling_data, tiling_arg)
#endif
