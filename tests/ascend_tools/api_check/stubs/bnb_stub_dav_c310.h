// Names of the dav-c310 (ascend950) register-based vector layer and SIMT
// layer that the public headers use in CPU-debug mode (CPU stand-ins; see
// stub_def.h). Compile-only: the project does not model this core, so every
// intrinsic here stops a run with its name.
#ifndef BNB_API_CHECK_STUB_DAV_C310_H
#define BNB_API_CHECK_STUB_DAV_C310_H
#include <cstdint>

#define __VEC_SCOPE__

// Operand enums of the register instructions (values only name a choice).
enum class Pat : uint8_t { ALL = 0, ALLF };
enum class Dist : uint8_t { DIST_NORM = 0, DIST_BRC_B16, DIST_BRC_B32, DIST_DINTLV_B32, DIST_INTLV_B32, DIST_PK, DIST_US };
enum class DistVST : uint8_t { DIST_NORM = 0, DIST_NORM_B8, DIST_NORM_B16, DIST_NORM_B32 };
enum class Post : uint8_t { POST_UPDATE_VALUE = 0 };
enum class Part : uint8_t { PART_STUB = 0 };
enum class Part_T : uint8_t { PART_T_STUB = 0 };
enum class HiloPart : uint8_t { Lower = 0, Higher };
enum class RoundingSaturation : uint8_t { RS_DISABLE_VALUE = 0, RS_ENABLE_VALUE };
enum class ROUND : uint8_t { R = 0, A, F, C, Z, O, H, CAST_RINT, CAST_ROUND, CAST_FLOOR, CAST_CEIL, CAST_TRUNC, CAST_ODD,
    CAST_HYBRID };
enum class Mode : uint8_t { ZEROING = 0, MERGING };
enum class Bin : uint8_t { BIN_STUB = 0 };
enum class CpuMode : uint8_t { CPU_MODE_STUB = 0 };
enum class Order : uint8_t { ORDER_STUB = 0 };
enum class Pos : uint8_t { POS_STUB = 0 };
enum class Spr : uint8_t { SPR_STUB = 0 };
enum class StoreMode : uint8_t { STORE_MODE_STUB = 0 };
enum BnbC310Literal : uint8_t { HIGHER = 0, LOWER, MODE_ZEROING, MODE_MERGING, PART_EVEN, PART_ODD, PAT_ALL, PAT_ALLF,
    POST_UPDATE, ROUND_R, ROUND_Z, RS_DISABLE, RS_ENABLE, ST_VLD, ST_VST, SV_ALL, VS_ALL, VV_ALL, LD_VST, VLD_ST,
    VLD_VST, VST_LD, VST_ST, VST_VLD, VST_VST };

// Vector register types (one 256-byte register each).
#define BNB_STUB_VREG(NAME) \
    struct NAME {           \
        uint8_t bytes[256]; \
    }
BNB_STUB_VREG(vector_u8);
BNB_STUB_VREG(vector_s8);
BNB_STUB_VREG(vector_u16);
BNB_STUB_VREG(vector_s16);
BNB_STUB_VREG(vector_u32);
BNB_STUB_VREG(vector_s32);
BNB_STUB_VREG(vector_u64);
BNB_STUB_VREG(vector_s64);
BNB_STUB_VREG(vector_f16);
BNB_STUB_VREG(vector_bf16);
BNB_STUB_VREG(vector_f32);
BNB_STUB_VREG(vector_f8e4m3);
BNB_STUB_VREG(vector_f8e5m2);
BNB_STUB_VREG(vector_f8e8m0);
BNB_STUB_VREG(vector_hif8);
BNB_STUB_VREG(vector_f4e1m2x2);
BNB_STUB_VREG(vector_f4e2m1x2);
BNB_STUB_VREG(vector_s4x2);
#undef BNB_STUB_VREG

// SIMT vector types and thread geometry.
#define BNB_STUB_VEC1(NAME, T) struct NAME { T x; }
#define BNB_STUB_VEC2(NAME, T) struct NAME { T x, y; }
#define BNB_STUB_VEC3(NAME, T) struct NAME { T x, y, z; }
#define BNB_STUB_VEC4(NAME, T) struct NAME { T x, y, z, w; }
BNB_STUB_VEC1(float1, float); BNB_STUB_VEC2(float2, float); BNB_STUB_VEC3(float3, float); BNB_STUB_VEC4(float4, float);
BNB_STUB_VEC1(int1, int32_t); BNB_STUB_VEC2(int2, int32_t); BNB_STUB_VEC3(int3, int32_t); BNB_STUB_VEC4(int4, int32_t);
BNB_STUB_VEC1(long1, int64_t); BNB_STUB_VEC2(long2, int64_t); BNB_STUB_VEC3(long3, int64_t);
BNB_STUB_VEC4(long4, int64_t);
BNB_STUB_VEC2(half2, half);
namespace cce {
struct dim3 {
    uint32_t x = 1, y = 1, z = 1;
};
template <auto funcPtr, typename... Args>
inline void async_invoke(dim3, Args &&...) { bnb_stub::Unmodelled("cce::async_invoke"); }
}  // namespace cce
using Dim3 = cce::dim3;
#undef BNB_STUB_VEC1
#undef BNB_STUB_VEC2
#undef BNB_STUB_VEC3
#undef BNB_STUB_VEC4

// CPU-debug SIMT machinery of the closed library (names only).
constexpr int32_t warpSize = 32;
struct Warp {
    template <typename... Args>
    BnbStubValue WarpOp(Args &&...) { bnb_stub::Unmodelled("Warp::WarpOp"); }
    template <typename... Args>
    BnbStubValue WarpShuffleOp(Args &&...) { bnb_stub::Unmodelled("Warp::WarpShuffleOp"); }
};
struct ThreadBlock {
    static ThreadBlock &GetBlockInstance() { bnb_stub::Unmodelled("ThreadBlock"); }
    template <typename... Args>
    BnbStubValue AtomicOp(Args &&...) { bnb_stub::Unmodelled("ThreadBlock::AtomicOp"); }
    Warp warps_[64];
};
extern Dim3 blockDim, blockIdx, gridDim, threadIdx;
enum class KernelMode : uint8_t { AIC_MODE = 0, AIV_MODE, MIX_MODE };
extern KernelMode g_kernelMode;
enum class QuantMode_post : uint8_t { NoConv = 0 };
namespace bisheng {
namespace cce {
inline void metrics_prof_start() {}
inline void metrics_prof_stop() {}
template <pipe_t pipe, typename I>
inline void mark_stamp(I) {}
}  // namespace cce
}  // namespace bisheng

#define BNB_STUB_VALUE_INTRINSIC(NAME) \
    template <typename... Args>        \
    inline BnbStubValue NAME(Args &&...) { bnb_stub::Unmodelled(#NAME); }
BNB_STUB_VALUE_INTRINSIC(GetLaneId)
BNB_STUB_VALUE_INTRINSIC(GetWarpId)
BNB_STUB_VALUE_INTRINSIC(GmAlloc)
BNB_STUB_VALUE_INTRINSIC(GmFree)
BNB_STUB_VALUE_INTRINSIC(Sync)
BNB_STUB_VALUE_INTRINSIC(VagCpuSim)
BNB_STUB_VALUE_INTRINSIC(__isfinite)
BNB_STUB_VALUE_INTRINSIC(chistv2)
BNB_STUB_VALUE_INTRINSIC(copy_gm_to_cbuf_align_v2)
BNB_STUB_VALUE_INTRINSIC(copy_gm_to_cbuf_multi_nd2nz)
BNB_STUB_VALUE_INTRINSIC(copy_gm_to_ubuf_align_v2)
BNB_STUB_VALUE_INTRINSIC(copy_ubuf_to_gm_align_v2)
BNB_STUB_VALUE_INTRINSIC(dhistv2)
BNB_STUB_VALUE_INTRINSIC(get_ar)
BNB_STUB_VALUE_INTRINSIC(get_buf)
BNB_STUB_VALUE_INTRINSIC(ldva)
BNB_STUB_VALUE_INTRINSIC(load_cbuf_to_ca_mx)
BNB_STUB_VALUE_INTRINSIC(load_cbuf_to_cb_mx)
BNB_STUB_VALUE_INTRINSIC(mem_bar)
BNB_STUB_VALUE_INTRINSIC(movp_b16)
BNB_STUB_VALUE_INTRINSIC(movp_b32)
BNB_STUB_VALUE_INTRINSIC(movvp)
BNB_STUB_VALUE_INTRINSIC(pand)
BNB_STUB_VALUE_INTRINSIC(pdintlv_b16)
BNB_STUB_VALUE_INTRINSIC(pdintlv_b32)
BNB_STUB_VALUE_INTRINSIC(pdintlv_b8)
BNB_STUB_VALUE_INTRINSIC(pintlv_b16)
BNB_STUB_VALUE_INTRINSIC(pintlv_b32)
BNB_STUB_VALUE_INTRINSIC(pintlv_b8)
BNB_STUB_VALUE_INTRINSIC(plds)
BNB_STUB_VALUE_INTRINSIC(plt_b16)
BNB_STUB_VALUE_INTRINSIC(plt_b32)
BNB_STUB_VALUE_INTRINSIC(plt_b8)
BNB_STUB_VALUE_INTRINSIC(pmov)
BNB_STUB_VALUE_INTRINSIC(pnot)
BNB_STUB_VALUE_INTRINSIC(por)
BNB_STUB_VALUE_INTRINSIC(ppack)
BNB_STUB_VALUE_INTRINSIC(psel)
BNB_STUB_VALUE_INTRINSIC(pset_b16)
BNB_STUB_VALUE_INTRINSIC(pset_b32)
BNB_STUB_VALUE_INTRINSIC(pset_b8)
BNB_STUB_VALUE_INTRINSIC(psts)
BNB_STUB_VALUE_INTRINSIC(pstu)
BNB_STUB_VALUE_INTRINSIC(punpack)
BNB_STUB_VALUE_INTRINSIC(pxor)
BNB_STUB_VALUE_INTRINSIC(rls_buf)
BNB_STUB_VALUE_INTRINSIC(set_channel_para)
BNB_STUB_VALUE_INTRINSIC(set_intra_block)
BNB_STUB_VALUE_INTRINSIC(set_loop0_stride_nddma)
BNB_STUB_VALUE_INTRINSIC(set_loop1_stride_nddma)
BNB_STUB_VALUE_INTRINSIC(set_loop1_stride_outtoub)
BNB_STUB_VALUE_INTRINSIC(set_loop1_stride_ubtoout)
BNB_STUB_VALUE_INTRINSIC(set_loop2_stride_nddma)
BNB_STUB_VALUE_INTRINSIC(set_loop2_stride_outtoub)
BNB_STUB_VALUE_INTRINSIC(set_loop2_stride_ubtoout)
BNB_STUB_VALUE_INTRINSIC(set_loop3_para)
BNB_STUB_VALUE_INTRINSIC(set_loop3_stride_nddma)
BNB_STUB_VALUE_INTRINSIC(set_loop4_stride_nddma)
BNB_STUB_VALUE_INTRINSIC(set_loop_size_outtoub)
BNB_STUB_VALUE_INTRINSIC(set_loop_size_ubtoout)
BNB_STUB_VALUE_INTRINSIC(set_mte2_nz_para)
BNB_STUB_VALUE_INTRINSIC(set_mte2_src_para)
BNB_STUB_VALUE_INTRINSIC(set_pad_cnt_nddma)
BNB_STUB_VALUE_INTRINSIC(set_pad_val_nddma)
BNB_STUB_VALUE_INTRINSIC(set_pcie_rd_ctrl)
BNB_STUB_VALUE_INTRINSIC(sprclr)
BNB_STUB_VALUE_INTRINSIC(vaddc)
BNB_STUB_VALUE_INTRINSIC(vaddcs)
BNB_STUB_VALUE_INTRINSIC(vag_b16)
BNB_STUB_VALUE_INTRINSIC(vag_b32)
BNB_STUB_VALUE_INTRINSIC(vag_b8)
BNB_STUB_VALUE_INTRINSIC(vaxpy)
BNB_STUB_VALUE_INTRINSIC(vbr)
BNB_STUB_VALUE_INTRINSIC(vci)
BNB_STUB_VALUE_INTRINSIC(vcmp_eq)
BNB_STUB_VALUE_INTRINSIC(vcmp_ge)
BNB_STUB_VALUE_INTRINSIC(vcmp_gt)
BNB_STUB_VALUE_INTRINSIC(vcmp_le)
BNB_STUB_VALUE_INTRINSIC(vcmp_lt)
BNB_STUB_VALUE_INTRINSIC(vcmp_ne)
BNB_STUB_VALUE_INTRINSIC(vcmps_eq)
BNB_STUB_VALUE_INTRINSIC(vcmps_ge)
BNB_STUB_VALUE_INTRINSIC(vcmps_gt)
BNB_STUB_VALUE_INTRINSIC(vcmps_le)
BNB_STUB_VALUE_INTRINSIC(vcmps_lt)
BNB_STUB_VALUE_INTRINSIC(vcmps_ne)
BNB_STUB_VALUE_INTRINSIC(vcvt)
BNB_STUB_VALUE_INTRINSIC(vdintlv)
BNB_STUB_VALUE_INTRINSIC(vdup)
BNB_STUB_VALUE_INTRINSIC(vgather2)
BNB_STUB_VALUE_INTRINSIC(vintlv)
BNB_STUB_VALUE_INTRINSIC(vlda)
BNB_STUB_VALUE_INTRINSIC(vldas)
BNB_STUB_VALUE_INTRINSIC(vlds)
BNB_STUB_VALUE_INTRINSIC(vldu)
BNB_STUB_VALUE_INTRINSIC(vldus)
BNB_STUB_VALUE_INTRINSIC(vmadd)
BNB_STUB_VALUE_INTRINSIC(vmov)
BNB_STUB_VALUE_INTRINSIC(vmula)
BNB_STUB_VALUE_INTRINSIC(vmull)
BNB_STUB_VALUE_INTRINSIC(vneg)
BNB_STUB_VALUE_INTRINSIC(vpack)
BNB_STUB_VALUE_INTRINSIC(vselr)
BNB_STUB_VALUE_INTRINSIC(vshl)
BNB_STUB_VALUE_INTRINSIC(vshls)
BNB_STUB_VALUE_INTRINSIC(vshrs)
BNB_STUB_VALUE_INTRINSIC(vsldb)
BNB_STUB_VALUE_INTRINSIC(vsqz)
BNB_STUB_VALUE_INTRINSIC(vsstb)
BNB_STUB_VALUE_INTRINSIC(vsta)
BNB_STUB_VALUE_INTRINSIC(vstar)
BNB_STUB_VALUE_INTRINSIC(vstas)
BNB_STUB_VALUE_INTRINSIC(vsts)
BNB_STUB_VALUE_INTRINSIC(vstur)
BNB_STUB_VALUE_INTRINSIC(vstus)
BNB_STUB_VALUE_INTRINSIC(vsubc)
BNB_STUB_VALUE_INTRINSIC(vsubcs)
BNB_STUB_VALUE_INTRINSIC(vtrc)
BNB_STUB_VALUE_INTRINSIC(vxor)
BNB_STUB_VALUE_INTRINSIC(wait_intra_block)
// Register forms of the instructions bnb_stub_impl.h models for the older cores.
BNB_STUB_VALUE_INTRINSIC(vadd)
BNB_STUB_VALUE_INTRINSIC(vsub)
BNB_STUB_VALUE_INTRINSIC(vmul)
BNB_STUB_VALUE_INTRINSIC(vdiv)
BNB_STUB_VALUE_INTRINSIC(vadds)
BNB_STUB_VALUE_INTRINSIC(vmuls)
BNB_STUB_VALUE_INTRINSIC(vsqrt)
BNB_STUB_VALUE_INTRINSIC(vcadd)
BNB_STUB_VALUE_INTRINSIC(wait_flag_dev)
#endif
