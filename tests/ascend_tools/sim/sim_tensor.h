// GlobalTensor / LocalTensor (CPU build). A LocalTensor remembers which UB
// buffer it views and that buffer's allocation generation, so any use after
// FreeTensor is caught.
#ifndef BNB_SIM_TENSOR_H
#define BNB_SIM_TENSOR_H
#include <string>
#include "sim_runtime.h"
#include "sim_types.h"
#include "sim_perf.h"  // ascend_impl/perf_model: counts and timeline (inactive outside perf_launch.cpp)

namespace AscendC {

// One UB buffer handed out by TPipe::InitBuffer.
struct SimSlot {
    uint8_t *addr = nullptr;
    uint32_t bytes = 0;
    TPosition pos = TPosition::VECCALC;
    uint32_t gen = 0;       // bumped by FreeTensor: older views become invalid
    bool live = false;      // allocated (TQue) or always (TBuf)
    int8_t enQueEvtId = -1; // TQue: the pipe's event id EnQue took (held until DeQue)
    int8_t freeEvtId = -1;  // TQue: the pipe's event id FreeTensor took (held until the next AllocTensor)
};

template <typename T>
class LocalTensor {
public:
    LocalTensor() = default;
    LocalTensor(SimSlot *slot, uint32_t offsetBytes, uint32_t sizeElems)
        : slot_(slot), gen_(slot->gen), offsetBytes_(offsetBytes), size_(sizeElems) {}

    LocalTensor operator[](const uint32_t offset) const
    {
        SimCheck(offset <= size_, "LocalTensor[]: offset " + std::to_string(offset) + " beyond size " +
                                      std::to_string(size_));  // (operator[] cannot take the call site)
        LocalTensor t = *this;
        t.offsetBytes_ += offset * sizeof(T);
        t.size_ -= offset;
        return t;
    }
    // Scalar UB accesses run on PIPE_S.
    T GetValue(const uint32_t index, bnb_rules::Src src = bnb_rules::Here()) const
    {
        perf::Scalar(false);
        T *p = SimPtr(index + 1, "LocalTensor::GetValue", false, src);
        SimScalar("LocalTensor::GetValue", p + index, false, src);
        return p[index];
    }
    void SetValue(const uint32_t index, const T value, bnb_rules::Src src = bnb_rules::Here()) const
    {
        perf::Scalar(false);
        T *p = SimPtr(index + 1, "LocalTensor::SetValue", false, src);
        SimScalar("LocalTensor::SetValue", p + index, true, src);
        p[index] = value;
    }
    uint32_t GetSize() const { return size_; }
    int32_t GetPosition() const { return static_cast<int32_t>(slot_ ? slot_->pos : TPosition::MAX); }
    template <typename U>
    LocalTensor<U> ReinterpretCast() const
    {
        LocalTensor<U> t(slot_, offsetBytes_, static_cast<uint32_t>(size_ * sizeof(T) / sizeof(U)));
        t.SimSetGen(gen_);
        return t;
    }

    // ---- CPU-build internals (not Ascend C API) ----
    // Pointer to the first element after checking the view is alive, in
    // bounds for `count` elements and (when `aligned`) 32-byte aligned in UB.
    T *SimPtr(uint64_t count, const char *op, bool aligned = true, bnb_rules::Src src = {},
              const char *operand = "operand") const
    {
        SimCheck(slot_ != nullptr, std::string(op) + ": LocalTensor was never allocated", src);
        SimCheck(slot_->live && slot_->gen == gen_, std::string(op) + ": LocalTensor used after FreeTensor", src);
        bnb_rules::FitsTensor(op, operand, count * sizeof(T), uint64_t(size_) * sizeof(T), src);
        uint8_t *p = slot_->addr + offsetBytes_;
        if (aligned) {
            bnb_rules::UbAligned(op, operand, SimThisCore().UbOffset(p), src);
        }
        bnb_rules::InUb(op, operand, SimThisCore().UbOffset(p), count * sizeof(T), SimThisCore().ubBytes, src);
        return reinterpret_cast<T *>(p);
    }
    // UB bytes [offset, offset + count elements) of this view (hazard tracking).
    bnb_hazards::Range SimRange(uint64_t count) const
    {
        const uint64_t lo = SimThisCore().UbOffset(slot_->addr + offsetBytes_);
        return {bnb_hazards::Space::UB, lo, lo + count * sizeof(T)};
    }
    void SimScalar(const char *op, const T *p, bool write, bnb_rules::Src src) const
    {
        const uint64_t lo = SimThisCore().UbOffset(p);
        const bnb_hazards::Range r{bnb_hazards::Space::UB, lo, lo + sizeof(T)};
        SimThisCore().pipes.Op(bnb_hazards::S, {op, src, bnb_hazards::S}, write ? std::vector<bnb_hazards::Range>{}
                                                                                 : std::vector<bnb_hazards::Range>{r},
                               write ? std::vector<bnb_hazards::Range>{r} : std::vector<bnb_hazards::Range>{});
    }
    SimSlot *SimSlotPtr() const { return slot_; }
    uint32_t SimGen() const { return gen_; }
    void SimSetGen(uint32_t g) { gen_ = g; }

private:
    SimSlot *slot_ = nullptr;
    uint32_t gen_ = 0;
    uint32_t offsetBytes_ = 0;
    uint32_t size_ = 0;
};

template <typename T>
class GlobalTensor {
public:
    GlobalTensor() = default;
    void SetGlobalBuffer(__gm__ T *buffer, uint64_t bufferSize)
    {
        addr_ = buffer;
        size_ = bufferSize;
        sized_ = true;
    }
    void SetGlobalBuffer(__gm__ T *buffer)
    {
        addr_ = buffer;
        sized_ = false;
    }
    GlobalTensor operator[](const uint64_t offset) const
    {
        GlobalTensor t = *this;
        t.addr_ += offset;
        if (sized_) {
            SimCheck(offset <= size_, "GlobalTensor[]: offset beyond the buffer");
            t.size_ -= offset;
        }
        return t;
    }
    // Scalar GM accesses run on PIPE_S through the core's data cache.
    T GetValue(const uint64_t offset, bnb_rules::Src src = bnb_rules::Here()) const
    {
        perf::Scalar(true);
        T *p = SimPtr(offset + 1, "GlobalTensor::GetValue", src) + offset;
        SimScalar("GlobalTensor::GetValue", p, false, src);
        return *p;
    }
    void SetValue(const uint64_t offset, const T value, bnb_rules::Src src = bnb_rules::Here())
    {
        perf::Scalar(true);
        T *p = SimPtr(offset + 1, "GlobalTensor::SetValue", src) + offset;
        SimScalar("GlobalTensor::SetValue", p, true, src, &value);
        *p = value;
    }
    const __gm__ T *GetPhyAddr() const { return addr_; }
    uint64_t GetSize() const { return size_; }

    // ---- CPU-build internals ----
    // `extent` = elements touched from the start of this view.
    T *SimPtr(uint64_t extent, const char *op, bnb_rules::Src src = {}) const
    {
        SimCheck(addr_ != nullptr, std::string(op) + ": GlobalTensor has no buffer (null GM address)", src);
        SimCheck(!SimThisCore().InUb(addr_), std::string(op) + ": a GlobalTensor must address GM, not UB", src);
        if (sized_) {
            SimCheck(extent <= size_, std::string(op) + ": GM access of " + std::to_string(extent) +
                                          " elements beyond the buffer (" + std::to_string(size_) + ")", src);
        }
        return addr_;
    }
    void SimScalar(const char *op, const T *p, bool write, bnb_rules::Src src, const T *stored = nullptr) const
    {
        const bnb_hazards::Instr in{op, src, bnb_hazards::S};
        const auto a = reinterpret_cast<uint64_t>(p);
        SimThisCore().pipes.Op(bnb_hazards::S, in,
                               write ? std::vector<bnb_hazards::Range>{}
                                     : std::vector<bnb_hazards::Range>{{bnb_hazards::Space::GM, a, a + sizeof(T)}},
                               write ? std::vector<bnb_hazards::Range>{{bnb_hazards::Space::GM, a, a + sizeof(T)}}
                                     : std::vector<bnb_hazards::Range>{});
        SimThisCore().GmAccess(in, p, sizeof(T), write, stored);
    }

private:
    T *addr_ = nullptr;
    uint64_t size_ = 0;
    bool sized_ = false;
};

}  // namespace AscendC
#endif
