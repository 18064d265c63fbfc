// Element types and enums of the Ascend C API (CPU build).
#ifndef BNB_SIM_TYPES_H
#define BNB_SIM_TYPES_H
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

using half = _Float16;

// bfloat16 stored as its 16 bits; conversions round to nearest even.
struct bfloat16_t {
    uint16_t bits = 0;
    bfloat16_t() = default;
    bfloat16_t(float f) { bits = FromFloat(f); }
    operator float() const
    {
        uint32_t u = static_cast<uint32_t>(bits) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    static uint16_t FromFloat(float f)
    {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        if (std::isnan(f)) {
            return static_cast<uint16_t>((u >> 16) | 0x40);
        }
        u += 0x7FFF + ((u >> 16) & 1);
        return static_cast<uint16_t>(u >> 16);
    }
};

enum pipe_t { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL };
using event_t = int32_t;

namespace AscendC {

enum class TPosition : uint8_t { GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC, LCM = VECCALC, MAX };
using QuePosition = TPosition;

enum class RoundMode : uint8_t { CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };

enum class HardEvent : uint8_t { MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, MTE2_V, V_MTE2, MTE3_V, V_MTE3, M_V, V_M, V_V,
    MTE3_MTE1, MTE1_MTE3, MTE1_V, MTE2_M, M_MTE2, V_MTE1, M_FIX, FIX_M, MTE3_MTE2, MTE2_MTE3, S_V, V_S, S_MTE2,
    MTE2_S, S_MTE3, MTE3_S, MTE2_FIX, FIX_MTE2, FIX_S, M_S, FIX_MTE3, MAX };

template <typename T>
constexpr bool SimIsVecType()
{
    return std::is_same<T, float>::value || std::is_same<T, half>::value || std::is_same<T, bfloat16_t>::value ||
           std::is_same<T, int32_t>::value || std::is_same<T, int16_t>::value || std::is_same<T, uint16_t>::value;
}

}  // namespace AscendC
#endif
