// The intrinsics the BatchNormBackward kernels reach on the Atlas A2 / A3
// (dav-c220), Atlas training (dav-c100) and Atlas inference (dav-m200) vector
// cores, modelled on the CPU (stand-ins for CANN's closed CPU-debug library;
// see stub_def.h). Every other intrinsic is declared generically in
// bnb_stub_intrinsics.h and stops a run with its name.
//
// Model: one process per core (bnb_stub_runtime.cpp), so the state below is
// per core. Data moves in 32-byte blocks; vector instructions work on 256-byte
// repeats of 8 blocks, with per-block and per-repeat strides in blocks, under
// the vector mask: in normal mode a bit per element of a repeat (low word:
// elements 0..63, high word: 64..127), in counter mode the low word is the
// element count and the repeat count is derived from it. Reductions sum
// pairwise within a repeat. Every instruction completes before the next one
// starts, and tells the pipe-hazard tracker (bnb_stub_pipes.cpp, the rule
// table's tracker) its pipe and the UB / GM bytes it reads and writes, so an
// instruction a board could run before the data it needs is there is reported
// all the same; set_flag / wait_flag / pipe_barrier feed the tracker's order.
#ifndef BNB_API_CHECK_STUB_IMPL_H
#define BNB_API_CHECK_STUB_IMPL_H
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>
#include "../../rules/bnb_rules.h"

namespace bnb_stub {
constexpr uint64_t BLOCK = 32;
constexpr uint64_t REPEAT = 256;

struct VectorState {
    bool counterMode = false;
    uint64_t maskHigh = ~0ull;
    uint64_t maskLow = ~0ull;
    int64_t acc = 0;  // bits of the last whole-count reduction (get_acc_val)
};
inline VectorState &Vec()
{
    static VectorState state;  // per process = per core
    return state;
}

// Elements per repeat for an instruction whose widest operand has `width` bytes.
inline uint64_t PerRepeat(uint64_t width) { return REPEAT / width; }

// Visits the active elements: f(repeat, element index within the repeat, running index).
template <typename F>
inline void ForEachActive(uint64_t repeat, uint64_t width, F f)
{
    const VectorState &v = Vec();
    const uint64_t per = PerRepeat(width);
    if (v.counterMode) {
        const uint64_t count = v.maskLow;
        for (uint64_t i = 0; i < count; ++i) {
            f(i / per, i % per, i);
        }
        return;
    }
    uint64_t n = 0;
    for (uint64_t r = 0; r < repeat; ++r) {
        for (uint64_t e = 0; e < per; ++e) {
            const bool on = e < 64 ? (v.maskLow >> e & 1) : (v.maskHigh >> (e - 64) & 1);
            if (on) {
                f(r, e, n++);
            }
        }
    }
}

// ---- what an instruction touches (bnb_stub_pipes.cpp checks and tracks it) ----
// One operand's bytes as address spans [lo, hi), merged while they are contiguous.
struct Operand {
    const char *name;
    std::vector<std::pair<uintptr_t, uintptr_t>> spans;
    explicit Operand(const char *n) : name(n) {}
    void Add(const void *p, uint64_t bytes)
    {
        const auto lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
        if (!spans.empty() && lo >= spans.back().first && lo <= spans.back().second) {
            spans.back().second = hi > spans.back().second ? hi : spans.back().second;
            return;
        }
        spans.emplace_back(lo, hi);
    }
};
// An instruction on `pipe` (MTE2 / MTE3 / V): every UB operand must stay in its
// TPipe buffer, and the tracker reports an unordered access of another pipe.
void PipeOp(pipe_t pipe, const char *intr, const std::vector<const Operand *> &reads,
            const std::vector<const Operand *> &writes);
void PipeSetFlag(pipe_t from, pipe_t to, int64_t id);
void PipeWaitFlag(pipe_t from, pipe_t to, int64_t id);
void PipeBarrierOf(pipe_t pipe);
// A TPipe buffer (InitBuffer): `num` buffers of `len` bytes from `addr`.
void PipeBuffers(uint64_t addr, uint64_t num, uint64_t len);

// Address of element e of repeat r for an operand of `bytes`-byte elements.
template <typename T>
inline T *At(T *base, uint64_t r, uint64_t e, uint64_t blkStride, uint64_t repStride)
{
    const uint64_t perBlock = BLOCK / sizeof(T);
    auto *p = reinterpret_cast<uint8_t *>(base) + r * repStride * BLOCK + (e / perBlock) * blkStride * BLOCK +
              (e % perBlock) * sizeof(T);
    return reinterpret_cast<T *>(p);
}

template <typename T>
inline float Load(const T *p) { return static_cast<float>(*p); }
template <typename T>
inline void Store(T *p, float v) { *p = static_cast<T>(v); }

// Two sources, and with READS_DST the destination as the third operand (the multiply-adds vmla:
// s0 * s1 + d, vmadd: s0 * d + s1); f takes (s0, s1, d).
template <bool READS_DST, typename D, typename S0, typename S1, typename F>
inline void Binary(const char *intr, D *dst, S0 *s0, S1 *s1, uint64_t repeat, uint64_t db, uint64_t b0, uint64_t b1,
                   uint64_t dr, uint64_t r0, uint64_t r1, F f)
{
    const uint64_t width = sizeof(D) > sizeof(S0) ? sizeof(D) : sizeof(S0);
    std::vector<std::pair<D *, float>> out;
    Operand od("dst"), o0("src0"), o1("src1"), oi("dst (read)");
    ForEachActive(repeat, width, [&](uint64_t r, uint64_t e, uint64_t) {
        D *d = At(dst, r, e, db, dr);
        const S0 *a = At(s0, r, e, b0, r0);
        const S1 *b = At(s1, r, e, b1, r1);
        od.Add(d, sizeof(D)), o0.Add(a, sizeof(S0)), o1.Add(b, sizeof(S1));
        if (READS_DST) oi.Add(d, sizeof(D));
        out.emplace_back(d, f(Load(a), Load(b), READS_DST ? Load(d) : 0.0f));
    });
    if (READS_DST) {
        PipeOp(PIPE_V, intr, {&o0, &o1, &oi}, {&od});
    } else {
        PipeOp(PIPE_V, intr, {&o0, &o1}, {&od});
    }
    for (auto &o : out) Store(o.first, o.second);  // operands may alias: read everything first
}

template <typename D, typename S, typename F>
inline void Unary(const char *intr, D *dst, S *src, uint64_t repeat, uint64_t db, uint64_t sb, uint64_t dr,
                  uint64_t sr, F f, bool reads = true)
{
    const uint64_t width = sizeof(D) > sizeof(S) ? sizeof(D) : sizeof(S);
    std::vector<std::pair<D *, float>> out;
    Operand od("dst"), os("src");
    ForEachActive(repeat, width, [&](uint64_t r, uint64_t e, uint64_t) {
        D *d = At(dst, r, e, db, dr);
        const S *a = At(src, r, e, sb, sr);
        od.Add(d, sizeof(D));
        if (reads) os.Add(a, sizeof(S));
        out.emplace_back(d, f(reads ? Load(a) : 0.0f));
    });
    PipeOp(PIPE_V, intr, {&os}, {&od});
    for (auto &o : out) Store(o.first, o.second);
}

inline float PairwiseSum(std::vector<float> v)
{
    if (v.empty()) return 0.0f;
    while (v.size() > 1) {
        std::vector<float> next((v.size() + 1) / 2);
        for (size_t i = 0; i < next.size(); ++i) {
            next[i] = v[i] + (i + next.size() < v.size() ? v[i + next.size()] : 0.0f);
        }
        v.swap(next);
    }
    return v[0];
}

// Bursts of whole 32-byte blocks; strides are gaps between bursts, in blocks.
inline void CopyBlocks(pipe_t pipe, const char *intr, void *dst, const void *src, uint64_t n, uint64_t len,
                       uint64_t srcGap, uint64_t dstGap)
{
    auto *d = static_cast<uint8_t *>(dst);
    const auto *s = static_cast<const uint8_t *>(src);
    Operand od("dst"), os("src");
    for (uint64_t i = 0; i < n; ++i) {
        od.Add(d + i * (len + dstGap) * BLOCK, len * BLOCK);
        os.Add(s + i * (len + srcGap) * BLOCK, len * BLOCK);
    }
    PipeOp(pipe, intr, {&os}, {&od});
    for (uint64_t i = 0; i < n; ++i) {
        std::memmove(d + i * (len + dstGap) * BLOCK, s + i * (len + srcGap) * BLOCK, len * BLOCK);
    }
}
}  // namespace bnb_stub

// ---- data movement ----
// The burst fields arrive in whatever type the headers computed them in (the
// parameters are templates): a value that does not fit the hardware field
// stops the run instead of wrapping (bnb_rules::FitsField / CopyParams).
namespace bnb_stub {
template <typename N, typename L, typename G0, typename G1>
inline void CheckBursts(const char *intr, N n, L len, G0 srcGap, G1 dstGap)
{
    bnb_rules::CopyParams(intr, uint64_t(n), uint64_t(len), uint64_t(srcGap), uint64_t(dstGap), {});
}
}  // namespace bnb_stub
template <typename N, typename L, typename G0, typename G1>
inline void copy_gm_to_ubuf(void *dst, void *src, uint8_t sid, N nBurst, L lenBurst, G0 srcStride, G1 dstStride)
{
    (void)sid;
    bnb_stub::CheckBursts("copy_gm_to_ubuf", nBurst, lenBurst, srcStride, dstStride);
    bnb_stub::CopyBlocks(PIPE_MTE2, "copy_gm_to_ubuf", dst, src, nBurst, lenBurst, srcStride, dstStride);
}
template <typename N, typename L, typename G0, typename G1>
inline void copy_ubuf_to_gm(void *dst, void *src, uint8_t sid, N nBurst, L lenBurst, G0 srcStride, G1 dstStride)
{
    (void)sid;
    bnb_stub::CheckBursts("copy_ubuf_to_gm", nBurst, lenBurst, srcStride, dstStride);
    bnb_stub::CopyBlocks(PIPE_MTE3, "copy_ubuf_to_gm", dst, src, nBurst, lenBurst, srcStride, dstStride);
}
template <typename N, typename L, typename G0, typename G1>
inline void copy_ubuf_to_ubuf(void *dst, void *src, uint8_t sid, N nBurst, L lenBurst, G0 srcStride, G1 dstStride)
{
    (void)sid;
    bnb_stub::CheckBursts("copy_ubuf_to_ubuf", nBurst, lenBurst, srcStride, dstStride);
    bnb_stub::CopyBlocks(PIPE_V, "copy_ubuf_to_ubuf", dst, src, nBurst, lenBurst, srcStride, dstStride);
}

// DataCopyPad (dav-c220): bursts of `len` bytes; GM gaps in bytes, UB gaps in
// blocks; each UB burst starts on a block and is padded to whole blocks.
template <typename T>
inline void copy_gm_to_ubuf_align_b(T *dst, T *src, uint64_t n, uint64_t len, uint8_t left, uint8_t right,
                                    uint64_t srcGap, uint64_t dstGap, uint64_t elemBytes)
{
    bnb_rules::PadParams("copy_gm_to_ubuf_align", n, len, elemBytes, left, right, {});
    auto *d = reinterpret_cast<uint8_t *>(dst);
    const auto *s = reinterpret_cast<const uint8_t *>(src);
    const uint64_t span = (left * elemBytes + len + right * elemBytes + bnb_stub::BLOCK - 1) / bnb_stub::BLOCK *
                          bnb_stub::BLOCK;
    bnb_stub::Operand od("dst"), os("src");
    for (uint64_t i = 0; i < n; ++i) {
        od.Add(d + i * (span + dstGap * bnb_stub::BLOCK), span);  // the padded blocks are written
        os.Add(s + i * (len + srcGap), len);
    }
    bnb_stub::PipeOp(PIPE_MTE2, "copy_gm_to_ubuf_align", {&os}, {&od});
    for (uint64_t i = 0; i < n; ++i) {
        std::memcpy(d + i * (span + dstGap * bnb_stub::BLOCK) + left * elemBytes, s + i * (len + srcGap), len);
    }
}
template <typename T>
inline void copy_ubuf_to_gm_align_b(T *dst, T *src, uint64_t n, uint64_t len, uint64_t srcGap, uint64_t dstGap)
{
    bnb_rules::PadParams("copy_ubuf_to_gm_align", n, len, 0, 0, 0, {});
    auto *d = reinterpret_cast<uint8_t *>(dst);
    const auto *s = reinterpret_cast<const uint8_t *>(src);
    const uint64_t span = (len + bnb_stub::BLOCK - 1) / bnb_stub::BLOCK * bnb_stub::BLOCK;
    bnb_stub::Operand od("dst"), os("src");
    for (uint64_t i = 0; i < n; ++i) {
        od.Add(d + i * (len + dstGap), len);
        os.Add(s + i * (span + srcGap * bnb_stub::BLOCK), len);
    }
    bnb_stub::PipeOp(PIPE_MTE3, "copy_ubuf_to_gm_align", {&os}, {&od});
    for (uint64_t i = 0; i < n; ++i) {
        std::memcpy(d + i * (len + dstGap), s + i * (span + srcGap * bnb_stub::BLOCK), len);
    }
}
template <typename T, typename N, typename L>
inline void copy_gm_to_ubuf_align_b32(T *dst, T *src, uint8_t sid, N n, L len, uint8_t left,
                                      uint8_t right, uint32_t srcGap, uint32_t dstGap)
{
    (void)sid;
    copy_gm_to_ubuf_align_b(dst, src, n, len, left, right, srcGap, dstGap, 4);
}
template <typename T, typename N, typename L>
inline void copy_gm_to_ubuf_align_b16(T *dst, T *src, uint8_t sid, N n, L len, uint8_t left,
                                      uint8_t right, uint32_t srcGap, uint32_t dstGap)
{
    (void)sid;
    copy_gm_to_ubuf_align_b(dst, src, n, len, left, right, srcGap, dstGap, 2);
}
template <typename T, typename N, typename L>
inline void copy_gm_to_ubuf_align_b8(T *dst, T *src, uint8_t sid, N n, L len, uint8_t left,
                                     uint8_t right, uint32_t srcGap, uint32_t dstGap)
{
    (void)sid;
    copy_gm_to_ubuf_align_b(dst, src, n, len, left, right, srcGap, dstGap, 1);
}
template <typename T, typename N, typename L>
inline void copy_ubuf_to_gm_align_b32(T *dst, T *src, uint8_t sid, N n, L len, uint8_t left,
                                      uint8_t right, uint32_t srcGap, uint32_t dstGap)
{
    (void)sid, (void)left, (void)right;
    copy_ubuf_to_gm_align_b(dst, src, n, len, srcGap, dstGap);
}
template <typename T, typename N, typename L>
inline void copy_ubuf_to_gm_align_b16(T *dst, T *src, uint8_t sid, N n, L len, uint8_t left,
                                      uint8_t right, uint32_t srcGap, uint32_t dstGap)
{
    (void)sid, (void)left, (void)right;
    copy_ubuf_to_gm_align_b(dst, src, n, len, srcGap, dstGap);
}
template <typename T, typename N, typename L>
inline void copy_ubuf_to_gm_align_b8(T *dst, T *src, uint8_t sid, N n, L len, uint8_t left,
                                     uint8_t right, uint32_t srcGap, uint32_t dstGap)
{
    (void)sid, (void)left, (void)right;
    copy_ubuf_to_gm_align_b(dst, src, n, len, srcGap, dstGap);
}

// ---- scalar bit operations ----
inline int64_t sff0(uint64_t x)  // first 0 bit from the least significant end; -1 when none
{
    for (int64_t i = 0; i < 64; ++i) {
        if (!(x >> i & 1)) return i;
    }
    return -1;
}
inline int64_t sff1(uint64_t x)
{
    for (int64_t i = 0; i < 64; ++i) {
        if (x >> i & 1) return i;
    }
    return -1;
}
inline uint64_t sbitset0(uint64_t x, int64_t i) { return x & ~(1ull << i); }
inline uint64_t sbitset1(uint64_t x, int64_t i) { return x | (1ull << i); }
inline int64_t bcnt1(uint64_t x) { return __builtin_popcountll(x); }
inline int64_t bcnt0(uint64_t x) { return 64 - __builtin_popcountll(x); }
inline int64_t clz(uint64_t x) { return x == 0 ? 64 : __builtin_clzll(x); }

// ---- vector mask ----
inline void set_mask_count() { bnb_stub::Vec().counterMode = true; }
inline void set_mask_norm() { bnb_stub::Vec().counterMode = false; }
inline void set_vector_mask(uint64_t high, uint64_t low)
{
    bnb_stub::Vec().maskHigh = high;
    bnb_stub::Vec().maskLow = low;
}
inline int64_t get_acc_val() { return bnb_stub::Vec().acc; }
// CTRL register: only the mask-mode bit (56: counter mode) is modelled; the
// headers' own checks read it (IsMaskNorm).
inline int64_t get_ctrl() { return bnb_stub::Vec().counterMode ? int64_t(1) << 56 : 0; }

// ---- synchronisation inside a core: the order the hazard tracker checks against ----
template <typename A, typename B, typename C>
inline void set_flag(A from, B to, C id)
{
    bnb_stub::PipeSetFlag(pipe_t(from), pipe_t(to), int64_t(id));
}
template <typename A, typename B, typename C>
inline void wait_flag(A from, B to, C id)
{
    bnb_stub::PipeWaitFlag(pipe_t(from), pipe_t(to), int64_t(id));
}
inline void pipe_barrier(pipe_t pipe) { bnb_stub::PipeBarrierOf(pipe); }
template <typename T, typename L, typename D>
inline void dcci(T *, L, D) {}   // no data cache on the CPU
template <typename T, typename L>
inline void dcci(T *, L) {}
inline void set_atomic_none() {}  // the kernels never enable atomics

// ---- synchronisation across cores (bnb_stub_runtime.cpp) ----
// dav-c220 hardware SyncAll of a vector-only kernel: every core sets the
// all-core flag (mode 0 of the message) and waits for it; modelled as a
// barrier of the launch's cores. Other modes (cube / vector groups) stop the run.
void ffts_cross_core_sync(pipe_t pipe, uint64_t config);
void wait_flag_dev(int64_t flagId);

// ---- vector instructions ----
#define BNB_STUB_BINARY(NAME, READS_DST, EXPR)                                                                 \
    template <typename T, typename R>                                                                         \
    inline void NAME(T *dst, T *src0, T *src1, R repeat, uint8_t dstBlk, uint8_t src0Blk, uint8_t src1Blk,    \
                     uint8_t dstRep, uint8_t src0Rep, uint8_t src1Rep)                                         \
    {                                                                                                         \
        bnb_rules::RepeatTimes(#NAME, uint64_t(repeat), {});                                                   \
        bnb_stub::Binary<READS_DST>(#NAME, dst, src0, src1, repeat, dstBlk, src0Blk, src1Blk, dstRep, src0Rep, \
                                    src1Rep, [](float a, float b, float d) { (void)d; return EXPR; });          \
    }
BNB_STUB_BINARY(vadd, false, a + b)
BNB_STUB_BINARY(vsub, false, a - b)
BNB_STUB_BINARY(vmul, false, a * b)
BNB_STUB_BINARY(vdiv, false, a / b)
BNB_STUB_BINARY(vmla, true, a * b + d)
BNB_STUB_BINARY(vmadd, true, a * d + b)
#undef BNB_STUB_BINARY

#define BNB_STUB_SCALAR(NAME, EXPR)                                                                        \
    template <typename T, typename S, typename R>                                                         \
    inline void NAME(T *dst, T *src, S scalar, R repeat, uint16_t dstBlk, uint16_t srcBlk,                \
                     uint16_t dstRep, uint16_t srcRep)                                                    \
    {                                                                                                     \
        bnb_rules::RepeatTimes(#NAME, uint64_t(repeat), {});                                              \
        const float s = static_cast<float>(scalar);                                                       \
        bnb_stub::Unary(#NAME, dst, src, repeat, dstBlk, srcBlk, dstRep, srcRep, [s](float a) { return EXPR; }); \
    }
BNB_STUB_SCALAR(vadds, a + s)
BNB_STUB_SCALAR(vmuls, a * s)
#undef BNB_STUB_SCALAR

// vaxpy: dst = src * scalar + dst (reads the destination too).
template <typename T, typename S, typename R>
inline void vaxpy(T *dst, T *src, S scalar, R repeat, uint16_t dstBlk, uint16_t srcBlk, uint16_t dstRep,
                  uint16_t srcRep)
{
    bnb_rules::RepeatTimes("vaxpy", uint64_t(repeat), {});
    const float s = static_cast<float>(scalar);
    bnb_stub::Binary<true>("vaxpy", dst, src, src, repeat, dstBlk, srcBlk, srcBlk, dstRep, srcRep, srcRep,
                           [s](float a, float b, float d) { (void)b; return a * s + d; });
}

template <typename T>
inline void vsqrt(T *dst, T *src, uint8_t repeat, uint16_t dstBlk, uint16_t srcBlk, uint16_t dstRep, uint16_t srcRep)
{
    bnb_stub::Unary("vsqrt", dst, src, repeat, dstBlk, srcBlk, dstRep, srcRep, [](float a) { return std::sqrt(a); });
}

template <typename T, typename S>
inline void vector_dup(T *dst, S scalar, uint8_t repeat, uint16_t dstBlk, uint16_t srcBlk, uint16_t dstRep,
                       uint16_t srcRep)
{
    (void)srcBlk, (void)srcRep;
    const float s = static_cast<float>(scalar);
    bnb_stub::Unary("vector_dup", dst, dst, repeat, dstBlk, dstBlk, dstRep, dstRep, [s](float) { return s; },
                    false);
}

// Conversions: float <-> half / bfloat16, round to nearest even (the `r`
// forms) or exact widening.
#define BNB_STUB_CONV(NAME, D, S)                                                                               \
    inline void NAME(D *dst, S *src, uint8_t repeat, uint16_t dstBlk, uint16_t srcBlk, uint16_t dstRep,         \
                     uint16_t srcRep)                                                                           \
    {                                                                                                           \
        bnb_stub::Unary(#NAME, dst, src, repeat, dstBlk, srcBlk, dstRep, srcRep, [](float a) { return a; });    \
    }
BNB_STUB_CONV(vconv_f162f32, float, half)
BNB_STUB_CONV(vconv_f322f16r, half, float)
BNB_STUB_CONV(vconv_f322f16, half, float)  // CAST_NONE: nearest even when precision is lost
BNB_STUB_CONV(vconv_bf162f32, float, bfloat16_t)
BNB_STUB_CONV(vconv_f322bf16r, bfloat16_t, float)
#undef BNB_STUB_CONV

// vcopy (Copy, masked repeat form): the active elements of repeat r, block b of src (r * srcRepeatSize +
// b * srcStride blocks) to the same element of dst's block (r * dstRepeatSize + b * dstStride); the bits
// move unchanged (16- or 32-bit elements).
template <typename T, typename R, typename S0, typename S1, typename S2, typename S3>
inline void vcopy(T *dst, T *src, R repeat, S0 dstStride, S1 srcStride, S2 dstRepeatSize, S3 srcRepeatSize)
{
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "vcopy: 16- or 32-bit elements");
    bnb_rules::RepeatTimes("vcopy", uint64_t(repeat), {});
    bnb_rules::BlockStride("vcopy", "dst", uint64_t(dstStride), 65535, true, {});
    bnb_rules::BlockStride("vcopy", "src", uint64_t(srcStride), 65535, false, {});
    bnb_rules::CopyRepeatSizes("vcopy", uint64_t(dstRepeatSize), uint64_t(srcRepeatSize), {});
    std::vector<std::pair<T *, T>> out;
    bnb_stub::Operand od("dst"), os("src");
    bnb_stub::ForEachActive(uint64_t(repeat), sizeof(T), [&](uint64_t r, uint64_t e, uint64_t) {
        T *d = bnb_stub::At(dst, r, e, uint64_t(dstStride), uint64_t(dstRepeatSize));
        const T *s = bnb_stub::At(src, r, e, uint64_t(srcStride), uint64_t(srcRepeatSize));
        od.Add(d, sizeof(T)), os.Add(s, sizeof(T));
        out.emplace_back(d, *s);
    });
    bnb_stub::PipeOp(PIPE_V, "vcopy", {&os}, {&od});
    for (auto &o : out) *o.first = o.second;
}

// vgather (Gather): active element e of repeat r of dst (dstRepStride blocks a repeat) = the element
// offsets[r * per + e] bytes past the source the headers pass in CPU-debug mode (SetModelGatherbSrc0Tensor:
// the UB address inside the instruction is 32 bits, the CPU one is not); the bits move unchanged. The
// dav-m200 form packs the address, dstRepStride (bits 32..39) and repeatTime (56..63) into one config.
namespace bnb_stub {
struct GatherSource {
    uint64_t addr = 0;    // the source's element srcBaseOffset bytes on
    uint32_t elems = 0;   // the source tensor's elements (GetSize), counted from its start
};
inline GatherSource &GatherSrc()
{
    static GatherSource source;  // per process = per core
    return source;
}
template <typename T>
inline void GatherModel(T *dst, const uint32_t *offsets, uint64_t dstRepStride, uint64_t repeat)
{
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "vgather: 16- or 32-bit elements");
    const GatherSource g = GatherSrc();
    bnb_rules::Require(g.addr != 0, "vgather", "no source set (SetModelGatherbSrc0Tensor)", "", {});
    bnb_rules::RepeatTimes("vgather", repeat, {});
    const uint64_t per = PerRepeat(sizeof(T));
    Operand od("dst"), oo("srcOffset"), os("src");
    std::vector<std::pair<T *, T>> out;
    ForEachActive(repeat, sizeof(T), [&](uint64_t r, uint64_t e, uint64_t) {
        const uint32_t *o = offsets + r * per + e;
        // (the exact range, from the base offset, is the argument checker's: CheckFuncGatherImpl)
        bnb_rules::Require(uint64_t(*o) + sizeof(T) <= uint64_t(g.elems) * sizeof(T), "vgather",
                           "offset past the source", "", {});
        const T *src = reinterpret_cast<const T *>(g.addr + *o);
        T *d = At(dst, r, e, 1, dstRepStride);
        oo.Add(o, sizeof(uint32_t)), os.Add(src, sizeof(T)), od.Add(d, sizeof(T));
        out.emplace_back(d, *src);
    });
    PipeOp(PIPE_V, "vgather", {&oo, &os}, {&od});
    for (auto &x : out) *x.first = x.second;
}
}  // namespace bnb_stub

template <typename T>
inline void vgather(T *dst, uint32_t *offsets, uint64_t config)
{
    bnb_stub::GatherModel(dst, offsets, config >> 32 & 0xFF, config >> 56 & 0xFF);
}
template <typename T>
inline void vgather(T *dst, uint32_t *offsets, uint32_t, uint16_t dstRepStride, uint8_t repeat)
{
    bnb_stub::GatherModel(dst, offsets, dstRepStride, repeat);
}

// vbrcb (Brcb): src element 8 * i + j to every element of dst's block (i * dstRepStride + j * dstBlkStride);
// src read contiguously; the bits move unchanged; dstBlkStride 0 undefined, src and dst never shared.
template <typename T, typename B, typename S, typename R>
inline void vbrcb(T *dst, T *src, B dstBlkStride, S dstRepStride, R repeat)
{
    static_assert(sizeof(T) == 2 || sizeof(T) == 4, "vbrcb: 16- or 32-bit elements");
    bnb_rules::RepeatTimes("vbrcb", uint64_t(repeat), {});
    bnb_rules::BlockStride("vbrcb", "dst", uint64_t(dstBlkStride), 65535, true, {});
    const uint64_t perBlock = bnb_stub::BLOCK / sizeof(T), n = uint64_t(repeat);
    bnb_stub::Operand od("dst"), os("src");
    os.Add(src, 8 * n * sizeof(T));
    std::vector<T> v(src, src + 8 * n);
    for (uint64_t i = 0; i < n; ++i) {
        for (uint64_t j = 0; j < 8; ++j) {
            od.Add(dst + (i * uint64_t(dstRepStride) + j * uint64_t(dstBlkStride)) * perBlock, bnb_stub::BLOCK);
        }
    }
    const auto lo = reinterpret_cast<uintptr_t>(src), hi = lo + 8 * n * sizeof(T);
    for (const auto &span : od.spans) {
        bnb_rules::Require(n == 0 || span.second <= lo || hi <= span.first, "vbrcb", "src and dst share memory", "",
                           {});
    }
    bnb_stub::PipeOp(PIPE_V, "vbrcb", {&os}, {&od});
    for (uint64_t i = 0; i < n; ++i) {
        for (uint64_t j = 0; j < 8; ++j) {
            T *b = dst + (i * uint64_t(dstRepStride) + j * uint64_t(dstBlkStride)) * perBlock;
            for (uint64_t e = 0; e < perBlock; ++e) b[e] = v[8 * i + j];
        }
    }
}

// vcgadd (ReduceDataBlock / BlockReduceSum): the active elements of block b of repeat r summed by a tree of
// adjacent pairs (ReduceDataBlock.md, "两两相加"; inactive lanes count 0) into dst[(r * dstRep) * 8 + b],
// dstRep in a repeat's 8 results; a block with no active element is not written.
template <typename T, typename R, typename D, typename B, typename S>
inline void vcgadd(T *dst, T *src, R repeat, D dstRep, B srcBlk, S srcRep)
{
    const uint64_t perBlock = bnb_stub::BLOCK / sizeof(T);
    std::vector<std::pair<uint64_t, std::vector<float>>> blocks;  // (result index, lanes)
    bnb_stub::Operand os("src"), od("dst");
    bnb_stub::ForEachActive(uint64_t(repeat), sizeof(T), [&](uint64_t r, uint64_t e, uint64_t) {
        const T *a = bnb_stub::At(src, r, e, uint64_t(srcBlk), uint64_t(srcRep));
        os.Add(a, sizeof(T));
        const uint64_t at = r * uint64_t(dstRep) * 8 + e / perBlock;
        if (blocks.empty() || blocks.back().first != at) {
            blocks.emplace_back(at, std::vector<float>(perBlock, 0.0f));
        }
        blocks.back().second[e % perBlock] = bnb_stub::Load(a);
    });
    for (const auto &b : blocks) {
        od.Add(dst + b.first, sizeof(T));
    }
    bnb_stub::PipeOp(PIPE_V, "vcgadd", {&os}, {&od});
    for (auto &b : blocks) {
        std::vector<float> v = b.second;
        while (v.size() > 1) {
            std::vector<float> next(v.size() / 2);
            for (size_t i = 0; i < next.size(); ++i) next[i] = v[2 * i] + v[2 * i + 1];
            v.swap(next);
        }
        dst[b.first] = static_cast<T>(v[0]);
    }
}

// Sum of each repeat's active elements into dst[r * dstRep]; in counter mode
// (the whole-count ReduceSum of dav-c220) the total also lands in the
// accumulator read back with get_acc_val.
template <typename T>
inline void vcadd(T *dst, T *src, uint8_t repeat, uint16_t dstRep, uint16_t srcBlk, uint16_t srcRep,
                  uint8_t mode = 0)
{
    (void)mode;
    std::vector<std::vector<float>> sums;
    bnb_stub::Operand os("src"), od("dst");
    bnb_stub::ForEachActive(repeat, sizeof(T), [&](uint64_t r, uint64_t e, uint64_t) {
        if (sums.size() <= r) sums.resize(r + 1);
        const T *a = bnb_stub::At(src, r, e, srcBlk, srcRep);
        os.Add(a, sizeof(T));
        sums[r].push_back(bnb_stub::Load(a));
    });
    const bool counter = bnb_stub::Vec().counterMode;
    for (uint64_t r = 0; r < (counter ? 1 : sums.size()); ++r) {
        od.Add(dst + (counter ? 0 : r * dstRep), sizeof(T));
    }
    bnb_stub::PipeOp(PIPE_V, "vcadd", {&os}, {&od});
    std::vector<float> perRepeat;
    for (uint64_t r = 0; r < sums.size(); ++r) {
        perRepeat.push_back(bnb_stub::PairwiseSum(sums[r]));
    }
    const float total = bnb_stub::PairwiseSum(perRepeat);
    if (bnb_stub::Vec().counterMode) {
        T v = static_cast<T>(total);
        int64_t bits = 0;
        std::memcpy(&bits, &v, sizeof(T));
        bnb_stub::Vec().acc = bits;
        *dst = v;
        return;
    }
    for (uint64_t r = 0; r < perRepeat.size(); ++r) {
        dst[r * dstRep] = static_cast<T>(perRepeat[r]);
    }
}
#endif
