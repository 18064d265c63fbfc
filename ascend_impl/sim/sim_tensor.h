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
                                      std::to_string(size_));
        LocalTensor t = *this;
        t.offsetBytes_ += offset * sizeof(T);
        t.size_ -= offset;
        return t;
    }
    T GetValue(const uint32_t index) const
    {
        perf::Scalar(false);
        return SimPtr(index + 1, "GetValue", false)[index];
    }
    void SetValue(const uint32_t index, const T value) const
    {
        perf::Scalar(false);
        SimPtr(index + 1, "SetValue", false)[index] = value;
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
    T *SimPtr(uint64_t count, const char *op, bool aligned = true) const
    {
        SimCheck(slot_ != nullptr, std::string(op) + ": LocalTensor was never allocated");
        SimCheck(slot_->live && slot_->gen == gen_, std::string(op) + ": LocalTensor used after FreeTensor");
        SimCheck(count <= size_, std::string(op) + ": " + std::to_string(count) + " elements exceed the tensor (" +
                                     std::to_string(size_) + ")");
        uint8_t *p = slot_->addr + offsetBytes_;
        if (aligned) {
            SimCheck(SimThisCore().UbOffset(p) % ONE_BLK_SIZE == 0,
                     std::string(op) + ": UB address not 32-byte aligned (offset " +
                         std::to_string(SimThisCore().UbOffset(p)) + ")");
        }
        return reinterpret_cast<T *>(p);
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
    T GetValue(const uint64_t offset) const
    {
        perf::Scalar(true);
        return SimPtr(offset + 1, "GlobalTensor::GetValue")[offset];
    }
    void SetValue(const uint64_t offset, const T value)
    {
        perf::Scalar(true);
        SimPtr(offset + 1, "GlobalTensor::SetValue")[offset] = value;
    }
    const __gm__ T *GetPhyAddr() const { return addr_; }
    uint64_t GetSize() const { return size_; }

    // ---- CPU-build internals ----
    // `extent` = elements touched from the start of this view.
    T *SimPtr(uint64_t extent, const char *op) const
    {
        SimCheck(addr_ != nullptr, std::string(op) + ": GlobalTensor has no buffer (null GM address)");
        if (sized_) {
            SimCheck(extent <= size_, std::string(op) + ": GM access of " + std::to_string(extent) +
                                          " elements beyond the buffer (" + std::to_string(size_) + ")");
        }
        return addr_;
    }

private:
    T *addr_ = nullptr;
    uint64_t size_ = 0;
    bool sized_ = false;
};

}  // namespace AscendC
#endif
