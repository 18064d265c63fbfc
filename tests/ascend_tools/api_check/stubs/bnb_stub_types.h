// Element types and enums of the device compiler (CPU stand-ins); see stub_def.h.
#ifndef BNB_API_CHECK_STUB_TYPES_H
#define BNB_API_CHECK_STUB_TYPES_H
#include <cstdint>
#include <cstring>
#include <cmath>
#include <type_traits>

namespace bnb_stub {
// IEEE binary16 <-> float, round to nearest even.
inline uint16_t FloatToHalfBits(float f)
{
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t absx = x & 0x7FFFFFFFu;
    if (absx > 0x7F800000u) return uint16_t(sign | 0x7E00u);          // NaN
    if (absx >= 0x477FF000u) return uint16_t(sign | 0x7C00u);         // overflow / inf
    if (absx < 0x38800000u) {                                         // subnormal or zero
        if (absx < 0x33000000u) return uint16_t(sign);
        const uint32_t e = absx >> 23;
        const uint32_t m = (absx & 0x7FFFFFu) | 0x800000u;
        const uint32_t shift = 126u - e;                              // 14 + (113 - e) ... place at bit 0
        uint32_t r = m >> (shift - 0);
        const uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
        r >>= 0;
        uint32_t q = m >> shift;
        if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
        (void)r;
        return uint16_t(sign | q);
    }
    uint32_t v = absx - 0x38000000u;                                  // rebias exponent
    const uint32_t rem = v & 0x1FFFu;
    uint32_t q = v >> 13;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
    return uint16_t(sign | q);
}
inline float HalfBitsToFloat(uint16_t h)
{
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu, x;
    if (e == 0x1Fu) {
        x = sign | 0x7F800000u | (m << 13);
    } else if (e == 0) {
        if (m == 0) {
            x = sign;
        } else {
            float f = std::ldexp(float(m), -24);
            std::memcpy(&x, &f, 4);
            x |= sign;
        }
    } else {
        x = sign | ((e + 112u) << 23) | (m << 13);
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}
inline uint16_t FloatToBf16Bits(float f)
{
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::isnan(f)) return uint16_t((u >> 16) | 0x40u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}
inline float Bf16BitsToFloat(uint16_t b)
{
    const uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
}  // namespace bnb_stub

namespace float16 {
// The CPU-debug `half`: 16 bits, converts to and from float.
struct Fp16T {
    uint16_t val = 0;
    Fp16T() = default;
    template <typename U, typename = std::enable_if_t<std::is_arithmetic<U>::value>>
    Fp16T(U v) : val(bnb_stub::FloatToHalfBits(float(v))) {}
    float ToFloat() const { return bnb_stub::HalfBitsToFloat(val); }
    operator float() const { return ToFloat(); }
    template <typename U>
    Fp16T &operator+=(const U &v) { return *this = Fp16T(float(*this) + float(v)); }
    template <typename U>
    Fp16T &operator-=(const U &v) { return *this = Fp16T(float(*this) - float(v)); }
    template <typename U>
    Fp16T &operator*=(const U &v) { return *this = Fp16T(float(*this) * float(v)); }
    template <typename U>
    Fp16T &operator/=(const U &v) { return *this = Fp16T(float(*this) / float(v)); }
};
}  // namespace float16
using half = float16::Fp16T;

namespace bfloat16 {
struct Bf16T {
    uint16_t val = 0;
    Bf16T() = default;
    template <typename U, typename = std::enable_if_t<std::is_arithmetic<U>::value>>
    Bf16T(U v) : val(bnb_stub::FloatToBf16Bits(float(v))) {}
    template <typename U, typename = std::enable_if_t<!std::is_arithmetic<U>::value &&
                                                      !std::is_same<std::decay_t<U>, Bf16T>::value &&
                                                      std::is_convertible<U, float>::value>,
              typename = void>
    explicit Bf16T(const U &v) : val(bnb_stub::FloatToBf16Bits(float(v))) {}
    float ToFloat() const { return bnb_stub::Bf16BitsToFloat(val); }
    operator float() const { return ToFloat(); }
    template <typename U>
    Bf16T &operator+=(const U &v) { return *this = Bf16T(float(*this) + float(v)); }
    template <typename U>
    Bf16T &operator-=(const U &v) { return *this = Bf16T(float(*this) - float(v)); }
    template <typename U>
    Bf16T &operator*=(const U &v) { return *this = Bf16T(float(*this) * float(v)); }
    template <typename U>
    Bf16T &operator/=(const U &v) { return *this = Bf16T(float(*this) / float(v)); }
};
}  // namespace bfloat16
using bfloat16_t = bfloat16::Bf16T;

// Narrow formats the headers name (never computed with by our kernels).
#define BNB_STUB_BYTE_TYPE(NAME)                                                                 \
    struct NAME {                                                                                \
        uint8_t val = 0;                                                                         \
        NAME() = default;                                                                        \
        template <typename U, typename = std::enable_if_t<std::is_arithmetic<U>::value>>         \
        NAME(U v) : val(uint8_t(v)) {}                                                           \
        float ToFloat() const { return float(val); }                                             \
        operator float() const { return ToFloat(); }                                             \
    }
BNB_STUB_BYTE_TYPE(fp8_e4m3fn_t);
BNB_STUB_BYTE_TYPE(fp8_e5m2_t);
BNB_STUB_BYTE_TYPE(fp8_e8m0_t);
BNB_STUB_BYTE_TYPE(fp4x2_e1m2_t);
BNB_STUB_BYTE_TYPE(fp4x2_e2m1_t);
BNB_STUB_BYTE_TYPE(hifloat8_t);
BNB_STUB_BYTE_TYPE(int4x2_t);

enum pipe_t : uint8_t { PIPE_S = 0, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_MTE4, PIPE_MTE5,
                        PIPE_V2, PIPE_FIX, PIPE_NUM_STUB };
enum event_t : uint8_t { EVENT_ID0 = 0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };

#endif
