// Intrinsic layer of the device compiler (CPU stand-ins); see stub_def.h.
//
// The public headers call several hundred intrinsics, for every core and data
// type, and a call only has to resolve for the headers to compile. The ones
// our kernels reach on the cores we run are modelled in bnb_stub_impl.h; every
// other one is declared generically here and stops a run with its name, so a
// run cannot pass through an intrinsic the stand-ins do not model.
#ifndef BNB_API_CHECK_STUB_INTRINSICS_H
#define BNB_API_CHECK_STUB_INTRINSICS_H
#include <cassert>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define __sync_alias__
#define __check_sync_alias__

namespace bnb_stub {
[[noreturn]] inline void Unmodelled(const char *name)
{
    std::fprintf(stderr, "api_check stand-ins: intrinsic %s is not modelled on the CPU\n", name);
    std::abort();
}
}  // namespace bnb_stub

// ---- enums of intrinsic operands ----
enum class QuantMode_t : uint8_t { NoQuant = 0, F322F16, F322BF16, DEQF16, VDEQF16, DEQS16, VDEQS16, REQ8, VREQ8, REQ4,
    VREQ4, QF322B8_PRE, VQF322B8_PRE, QF322F16_PRE, VQF322F16_PRE, QF322BF16_PRE, VQF322BF16_PRE, QF322F32_PRE,
    VQF322F32_PRE, QF322FP8_PRE, VQF322FP8_PRE, QF322HIF8_PRE, VQF322HIF8_PRE, QF322HIF8_PRE_HYBRID,
    VQF322HIF8_PRE_HYBRID, QS322BF16_PRE, VQS322BF16_PRE, QF162B8_PRE, VQF162B8_PRE, QF162S4_PRE, VQF162S4_PRE,
    QF162S16_PRE, VQF162S16_PRE };
enum class Order_t : uint8_t { VALUE_INDEX = 0, INDEX_VALUE, ONLY_VALUE, ONLY_INDEX };
enum class cache_line_t : uint8_t { SINGLE_CACHE_LINE = 0, ENTIRE_DATA_CACHE };
enum class dcci_dst_t : uint8_t { CACHELINE_ALL = 0, CACHELINE_UB, CACHELINE_OUT, CACHELINE_ATOMIC };
enum class pad_t : uint8_t { PAD_NONE = 0 };
enum atomic_type_t : uint8_t { ATOMIC_TYPE_STUB = 0 };
enum atomic_op_t : uint8_t { ATOMIC_OP_STUB = 0 };
enum addr_cal_mode_t : uint8_t { inc = 0, dec = 1 };
enum mem_dsb_t : uint8_t { DSB_ALL = 0 };
enum mem_t : uint8_t { MEM_STUB = 0 };
enum ub_addr8_t : uint8_t { VA0 = 0, VA1, VA2, VA3, VA4, VA5, VA6, VA7 };
enum ConvRelu_t : uint8_t { CRMODE_NONE = 0, CRMODE_F32toF16_NONE, CRMODE_F32toF16_RELU, CRMODE_S32toF16_NONE,
    CRMODE_F16toF32_NONE, CRMODE_NONE_RELU, CRMODE_F16_MUL, CRMODE_S32toF16_DEQSCALE_SPR, CRMODE_DEQSCALE_VDEQ8,
    CRMODE_DEQSCALE_DEQ8, CRMODE_DEQSCALE_VDEQ16, CRMODE_DEQSCALE_DEQ16, CRMODE_DEQSCALE_VDEQS16, CRMODE_DEQSCALE_DEQS16 };
enum csize_t : uint8_t { CSIZE0 = 0, CSIZE1 };
enum vld_va_half_t : uint8_t { L128 = 0, H128 };

// ---- register types of the newer cores (names only) ----
struct MaskReg {};
struct AddrReg {};
struct UnalignRegForLoad {};
struct UnalignRegForStore {};
struct vector_bool {};
struct vector_address {};
struct vector_align {};

// ---- core identity and CPU-debug globals (defined in bnb_stub_runtime.cpp) ----
extern int64_t block_idx;
extern int64_t sub_block_idx;
extern int64_t block_num;
extern int64_t g_taskRation;
extern uint64_t g_fixpipeNdNzParam;

namespace AscendC {
extern bool g_isVdeq;
constexpr int32_t AIC_TYPE = 1;  // core kinds reported by the closed library's logging
constexpr int32_t AIV_TYPE = 2;
}  // namespace AscendC

// Result of an unmodelled intrinsic that returns a value.
struct BnbStubValue {
    template <typename T>
    operator T() const { return T{}; }
};

#if defined(__NPU_ARCH__) && __NPU_ARCH__ == 3510
#include "bnb_stub_dav_c310.h"
#endif

// ---- cross-core synchronisation of the CPU-debug library (bnb_stub_runtime.cpp) ----
void __sync_all_stub(int32_t usedCores, bool isAIVOnly);
void __ib_set_stub(int32_t blockIdx, int32_t eventID, bool isAIVOnly);
void __ib_wait_stub(int32_t blockIdx, int32_t eventID, bool isAIVOnly);
[[noreturn]] inline void trap() { bnb_stub::Unmodelled("trap"); }

#include "bnb_stub_impl.h"

// ---- intrinsics: generic declarations (everything bnb_stub_impl.h does not model) ----
#define BNB_STUB_INTRINSIC(NAME) \
    template <typename... Args> \
    inline void NAME(Args &&...) { bnb_stub::Unmodelled(#NAME); }
#define BNB_STUB_HOOK(NAME) \
    template <typename... Args> \
    inline void NAME(Args &&...) {}
#define BNB_STUB_GETTER(NAME) \
    template <typename... Args> \
    inline int64_t NAME(Args &&...) { bnb_stub::Unmodelled(#NAME); }
// CPU-debug checking hooks of the closed library: InitBuffer's buffers bound
// each UB operand (bnb_stub_pipes.cpp); the others are no-ops here.
template <typename P, typename K, typename N, typename A, typename L>
inline void AscendCBufInit(P pos, K isTbuf, N num, A addr, L len)
{
    (void)pos, (void)isTbuf;
    bnb_stub::PipeBuffers(uint64_t(addr), uint64_t(num), uint64_t(len));
}
BNB_STUB_HOOK(AscendCBufAbsAddr)
BNB_STUB_HOOK(AscendCBufEnque)
BNB_STUB_HOOK(AscendCBufDeque)
BNB_STUB_HOOK(AscendCBufGet)
BNB_STUB_HOOK(AscendCBufAlloc)
BNB_STUB_HOOK(AscendCBufFree)
BNB_STUB_HOOK(AscendCQueCreate)
BNB_STUB_HOOK(AscendCRecordPoolHierarchy)
BNB_STUB_HOOK(AscendCTBufPoolInit)
BNB_STUB_HOOK(AscendCTBufPoolResetCheck)
BNB_STUB_HOOK(AscendCUpdateTbufPoolStatus)
BNB_STUB_INTRINSIC(copy_cbuf_to_bt)
BNB_STUB_INTRINSIC(copy_cbuf_to_fbuf)
BNB_STUB_INTRINSIC(copy_cbuf_to_gm)
BNB_STUB_INTRINSIC(copy_gm_to_cbuf)
BNB_STUB_INTRINSIC(copy_gm_to_cbuf_multi_nd2nz_b16)
BNB_STUB_INTRINSIC(copy_gm_to_cbuf_multi_nd2nz_b32s)
BNB_STUB_INTRINSIC(copy_gm_to_cbuf_multi_nd2nz_b8)
BNB_STUB_INTRINSIC(create_cbuf_matrix)
BNB_STUB_INTRINSIC(dc_preload)
BNB_STUB_INTRINSIC(dsb)
BNB_STUB_INTRINSIC(hset_flag)
BNB_STUB_INTRINSIC(hwait_flag)
BNB_STUB_INTRINSIC(img2colv2_cbuf_to_ca)
BNB_STUB_INTRINSIC(img2colv2_cbuf_to_ca_s4)
BNB_STUB_INTRINSIC(img2colv2_cbuf_to_cb)
BNB_STUB_INTRINSIC(load_cbuf_to_ca_s4)
BNB_STUB_INTRINSIC(load_cbuf_to_cb_s4)
BNB_STUB_INTRINSIC(load_cbuf_to_cb_sp)
BNB_STUB_INTRINSIC(load_cbuf_to_cb_transpose_s4)
BNB_STUB_INTRINSIC(mad_sp)
BNB_STUB_INTRINSIC(preload)
BNB_STUB_INTRINSIC(scatter_vnchwconv_b16)
BNB_STUB_INTRINSIC(scatter_vnchwconv_b32)
BNB_STUB_INTRINSIC(scatter_vnchwconv_b8)
BNB_STUB_INTRINSIC(set_aipp_spr_0)
BNB_STUB_INTRINSIC(set_aipp_spr_1)
BNB_STUB_INTRINSIC(set_aipp_spr_18)
BNB_STUB_INTRINSIC(set_aipp_spr_19)
BNB_STUB_INTRINSIC(set_aipp_spr_2)
BNB_STUB_INTRINSIC(set_aipp_spr_20)
BNB_STUB_INTRINSIC(set_aipp_spr_21)
BNB_STUB_INTRINSIC(set_aipp_spr_3)
BNB_STUB_INTRINSIC(set_aipp_spr_4)
BNB_STUB_INTRINSIC(set_aipp_spr_5)
BNB_STUB_INTRINSIC(set_aipp_spr_6)
BNB_STUB_INTRINSIC(set_aipp_spr_7)
BNB_STUB_INTRINSIC(set_aipp_spr_8)
BNB_STUB_INTRINSIC(set_aipp_spr_9)
BNB_STUB_INTRINSIC(set_atomic_add)
BNB_STUB_INTRINSIC(set_atomic_bf16)
BNB_STUB_INTRINSIC(set_atomic_f16)
BNB_STUB_INTRINSIC(set_atomic_f32)
BNB_STUB_INTRINSIC(set_atomic_max)
BNB_STUB_INTRINSIC(set_atomic_min)
BNB_STUB_INTRINSIC(set_atomic_s16)
BNB_STUB_INTRINSIC(set_atomic_s32)
BNB_STUB_INTRINSIC(set_atomic_s8)
BNB_STUB_INTRINSIC(set_cmpmask)
BNB_STUB_INTRINSIC(set_ctrl)
BNB_STUB_INTRINSIC(set_data_exp_0)
BNB_STUB_INTRINSIC(set_data_exp_1)
BNB_STUB_INTRINSIC(set_data_exp_2)
BNB_STUB_INTRINSIC(set_data_exp_3)
BNB_STUB_INTRINSIC(set_deqscale)
BNB_STUB_INTRINSIC(set_ffts_base_addr)
BNB_STUB_INTRINSIC(set_fmatrix)
BNB_STUB_INTRINSIC(set_fmatrix_b)
BNB_STUB_INTRINSIC(set_fpc)
BNB_STUB_INTRINSIC(set_l1_3d_size)
BNB_STUB_INTRINSIC(set_l3d_rpt)
BNB_STUB_INTRINSIC(set_mov_pad_val)
BNB_STUB_INTRINSIC(set_nd_para)
BNB_STUB_INTRINSIC(set_padding)
BNB_STUB_INTRINSIC(set_quant_pre)
BNB_STUB_INTRINSIC(set_st_atomic_cfg)
BNB_STUB_INTRINSIC(set_va_reg_sb)
BNB_STUB_INTRINSIC(st_dev)
BNB_STUB_INTRINSIC(vabs)
BNB_STUB_INTRINSIC(vand)
// vcgadd: the register form (dav-c310) is not modelled; the UB form is (bnb_stub_impl.h)
BNB_STUB_INTRINSIC(vcgadd)
BNB_STUB_INTRINSIC(vcgmax)
BNB_STUB_INTRINSIC(vcmax)
BNB_STUB_INTRINSIC(vcmpv_eq)
BNB_STUB_INTRINSIC(vcmpv_ge)
BNB_STUB_INTRINSIC(vcmpv_gt)
BNB_STUB_INTRINSIC(vcmpv_le)
BNB_STUB_INTRINSIC(vcmpv_lt)
BNB_STUB_INTRINSIC(vcmpv_ne)
BNB_STUB_INTRINSIC(vcmpvs_eq)
BNB_STUB_INTRINSIC(vcmpvs_ge)
BNB_STUB_INTRINSIC(vcmpvs_gt)
BNB_STUB_INTRINSIC(vcmpvs_le)
BNB_STUB_INTRINSIC(vcmpvs_lt)
BNB_STUB_INTRINSIC(vcmpvs_ne)
BNB_STUB_INTRINSIC(vconv_bf162s32a)
BNB_STUB_INTRINSIC(vconv_bf162s32c)
BNB_STUB_INTRINSIC(vconv_bf162s32f)
BNB_STUB_INTRINSIC(vconv_bf162s32r)
BNB_STUB_INTRINSIC(vconv_bf162s32z)
BNB_STUB_INTRINSIC(vconv_deq)
BNB_STUB_INTRINSIC(vconv_f162s16a)
BNB_STUB_INTRINSIC(vconv_f162s16c)
BNB_STUB_INTRINSIC(vconv_f162s16f)
BNB_STUB_INTRINSIC(vconv_f162s16r)
BNB_STUB_INTRINSIC(vconv_f162s16z)
BNB_STUB_INTRINSIC(vconv_f162s32a)
BNB_STUB_INTRINSIC(vconv_f162s32c)
BNB_STUB_INTRINSIC(vconv_f162s32f)
BNB_STUB_INTRINSIC(vconv_f162s32r)
BNB_STUB_INTRINSIC(vconv_f162s32z)
BNB_STUB_INTRINSIC(vconv_f162s4)
BNB_STUB_INTRINSIC(vconv_f162s4a)
BNB_STUB_INTRINSIC(vconv_f162s4c)
BNB_STUB_INTRINSIC(vconv_f162s4f)
BNB_STUB_INTRINSIC(vconv_f162s4r)
BNB_STUB_INTRINSIC(vconv_f162s4z)
BNB_STUB_INTRINSIC(vconv_f162s8)
BNB_STUB_INTRINSIC(vconv_f162s8a)
BNB_STUB_INTRINSIC(vconv_f162s8c)
BNB_STUB_INTRINSIC(vconv_f162s8f)
BNB_STUB_INTRINSIC(vconv_f162s8r)
BNB_STUB_INTRINSIC(vconv_f162s8z)
BNB_STUB_INTRINSIC(vconv_f162u8)
BNB_STUB_INTRINSIC(vconv_f162u8a)
BNB_STUB_INTRINSIC(vconv_f162u8c)
BNB_STUB_INTRINSIC(vconv_f162u8f)
BNB_STUB_INTRINSIC(vconv_f162u8r)
BNB_STUB_INTRINSIC(vconv_f162u8z)
BNB_STUB_INTRINSIC(vconv_f322bf16a)
BNB_STUB_INTRINSIC(vconv_f322bf16c)
BNB_STUB_INTRINSIC(vconv_f322bf16f)
BNB_STUB_INTRINSIC(vconv_f322bf16z)
BNB_STUB_INTRINSIC(vconv_f322f16a)
BNB_STUB_INTRINSIC(vconv_f322f16c)
BNB_STUB_INTRINSIC(vconv_f322f16f)
BNB_STUB_INTRINSIC(vconv_f322f16o)
BNB_STUB_INTRINSIC(vconv_f322f16z)
BNB_STUB_INTRINSIC(vconv_f322f32a)
BNB_STUB_INTRINSIC(vconv_f322f32c)
BNB_STUB_INTRINSIC(vconv_f322f32f)
BNB_STUB_INTRINSIC(vconv_f322f32r)
BNB_STUB_INTRINSIC(vconv_f322f32z)
BNB_STUB_INTRINSIC(vconv_f322s16a)
BNB_STUB_INTRINSIC(vconv_f322s16c)
BNB_STUB_INTRINSIC(vconv_f322s16f)
BNB_STUB_INTRINSIC(vconv_f322s16r)
BNB_STUB_INTRINSIC(vconv_f322s16z)
BNB_STUB_INTRINSIC(vconv_f322s32a)
BNB_STUB_INTRINSIC(vconv_f322s32c)
BNB_STUB_INTRINSIC(vconv_f322s32f)
BNB_STUB_INTRINSIC(vconv_f322s32r)
BNB_STUB_INTRINSIC(vconv_f322s32z)
BNB_STUB_INTRINSIC(vconv_f322s64a)
BNB_STUB_INTRINSIC(vconv_f322s64c)
BNB_STUB_INTRINSIC(vconv_f322s64f)
BNB_STUB_INTRINSIC(vconv_f322s64r)
BNB_STUB_INTRINSIC(vconv_f322s64z)
BNB_STUB_INTRINSIC(vconv_s162f16)
BNB_STUB_INTRINSIC(vconv_s162f16a)
BNB_STUB_INTRINSIC(vconv_s162f16c)
BNB_STUB_INTRINSIC(vconv_s162f16f)
BNB_STUB_INTRINSIC(vconv_s162f16r)
BNB_STUB_INTRINSIC(vconv_s162f16z)
BNB_STUB_INTRINSIC(vconv_s162f32)
BNB_STUB_INTRINSIC(vconv_s322f32)
BNB_STUB_INTRINSIC(vconv_s322f32a)
BNB_STUB_INTRINSIC(vconv_s322f32c)
BNB_STUB_INTRINSIC(vconv_s322f32f)
BNB_STUB_INTRINSIC(vconv_s322f32r)
BNB_STUB_INTRINSIC(vconv_s322f32z)
BNB_STUB_INTRINSIC(vconv_s322s16)
BNB_STUB_INTRINSIC(vconv_s322s64)
BNB_STUB_INTRINSIC(vconv_s42f16)
BNB_STUB_INTRINSIC(vconv_s642f32a)
BNB_STUB_INTRINSIC(vconv_s642f32c)
BNB_STUB_INTRINSIC(vconv_s642f32f)
BNB_STUB_INTRINSIC(vconv_s642f32r)
BNB_STUB_INTRINSIC(vconv_s642f32z)
BNB_STUB_INTRINSIC(vconv_s642s32)
BNB_STUB_INTRINSIC(vconv_s82f16)
BNB_STUB_INTRINSIC(vconv_u82f16)
BNB_STUB_INTRINSIC(vexp)
BNB_STUB_INTRINSIC(vgather)
BNB_STUB_INTRINSIC(vld_va_reg)
BNB_STUB_INTRINSIC(vln)
BNB_STUB_INTRINSIC(vmax)
BNB_STUB_INTRINSIC(vmaxs)
BNB_STUB_INTRINSIC(vmin)
BNB_STUB_INTRINSIC(vmins)
BNB_STUB_INTRINSIC(vmulconv_f162s8)
BNB_STUB_INTRINSIC(vmulconv_f162u8)
BNB_STUB_INTRINSIC(vnot)
BNB_STUB_INTRINSIC(vor)
BNB_STUB_INTRINSIC(vrec)
BNB_STUB_INTRINSIC(vreducev2)
BNB_STUB_INTRINSIC(vsel)
BNB_STUB_INTRINSIC(vshr)
BNB_STUB_INTRINSIC(vtranspose)
BNB_STUB_GETTER(conv_f322f16o)
BNB_STUB_GETTER(conv_f322s32a)
BNB_STUB_GETTER(conv_f322s32c)
BNB_STUB_GETTER(conv_f322s32f)
BNB_STUB_GETTER(conv_f322s32r)
BNB_STUB_GETTER(get_arch_ver)
// The core's identity, as the CPU-debug runtime sets it per core (bnb_stub_runtime.cpp): the headers'
// software SyncAll (SoftSyncAllImpl) reads it through these.
inline int64_t get_block_idx() { return block_idx; }
inline int64_t get_block_num() { return block_num; }

BNB_STUB_GETTER(get_icache_prl_st)
BNB_STUB_GETTER(get_max_min_cnt)
BNB_STUB_GETTER(get_pc)
BNB_STUB_GETTER(get_rsvd_cnt)
BNB_STUB_GETTER(get_st_atomic_cfg)
BNB_STUB_GETTER(get_vms4_sr)
BNB_STUB_GETTER(ld_dev)
BNB_STUB_GETTER(sflbits)

BNB_STUB_INTRINSIC(copy_cbuf_to_ubuf)
BNB_STUB_INTRINSIC(copy_matrix_cc_to_ubuf)
BNB_STUB_INTRINSIC(copy_matrix_ubuf_to_cc)
BNB_STUB_INTRINSIC(copy_ubuf_to_cbuf)
BNB_STUB_INTRINSIC(copy_vector_cc_to_ubuf)
BNB_STUB_INTRINSIC(copy_vector_ubuf_to_cc)
BNB_STUB_INTRINSIC(create_ca_matrix)
BNB_STUB_INTRINSIC(create_cb_matrix)
BNB_STUB_GETTER(get_imm)
BNB_STUB_GETTER(get_status)
BNB_STUB_INTRINSIC(img2colv2_cbuf_to_cb_s4)
BNB_STUB_INTRINSIC(load_gm_to_cb_unzip)
BNB_STUB_INTRINSIC(load_gm_to_cbuf_unzip)
BNB_STUB_INTRINSIC(load_unzip_index_from_gm)
BNB_STUB_INTRINSIC(v4dtrans)
BNB_STUB_INTRINSIC(vadddeqrelu)
BNB_STUB_INTRINSIC(vcbd_s322s16)
BNB_STUB_INTRINSIC(vcmin)
BNB_STUB_INTRINSIC(vpadding)
BNB_STUB_INTRINSIC(vreduce)
BNB_STUB_INTRINSIC(vrelu)
BNB_STUB_INTRINSIC(vrsqrt)
BNB_STUB_INTRINSIC(vscatter)


#endif
