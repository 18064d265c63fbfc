// TPipe / TQue / TBuf (CPU build). TPipe::InitBuffer carves the core's UB;
// asking for more than the SoC's UB fails. TQue enforces its buffer count
// and queue depth; FreeTensor invalidates every view of the buffer.
#ifndef BNB_SIM_PIPE_H
#define BNB_SIM_PIPE_H
#include <deque>
#include <memory>
#include <string>
#include <vector>
#include "sim_tensor.h"

namespace AscendC {

using TEventID = int8_t;

class TPipe;
inline TPipe *&SimPipePtr()
{
    thread_local TPipe *pipe = nullptr;
    return pipe;
}

// Shared part of TQue and TBuf: the UB slots they own.
class SimBufOwner {
public:
    std::vector<std::unique_ptr<SimSlot>> slots;
};

// The hand-overs of a queue order two pipes as the real TQue does with its
// events (基础API/同步控制/核内同步/TQueSync模板参数.md): VECIN: EnQue/DeQue
// MTE2 -> V, FreeTensor/AllocTensor V -> MTE2; VECOUT: EnQue/DeQue V -> MTE3,
// FreeTensor/AllocTensor MTE3 -> V. Each buffer has its own event.
template <TPosition pos>
struct SimQueuePipes {
    static constexpr bool in = pos == TPosition::VECIN, out = pos == TPosition::VECOUT;
    static constexpr int producer = in ? bnb_hazards::MTE2 : bnb_hazards::V;
    static constexpr int consumer = in ? bnb_hazards::V : bnb_hazards::MTE3;
};

template <TPosition pos, int32_t depth, auto mask = 0>
class TQue : public SimBufOwner {
    static_assert(depth >= 1, "TQue depth must be at least 1");
    using Pipes = SimQueuePipes<pos>;
    static constexpr bool kSync = Pipes::in || Pipes::out;

public:
    template <typename T>
    LocalTensor<T> AllocTensor(bnb_rules::Src at = bnb_rules::Here())
    {
        SimCheck(!slots.empty(), "AllocTensor: queue has no buffers (TPipe::InitBuffer not called)", at);
        // Round robin from a cursor, as the real TQueBind::AllocTensor (bufCursor), so
        // a buffer freed right after its store is not the next one handed out.
        for (size_t i = 0; i < slots.size(); ++i) {
            auto &s = slots[(cursor_ + i) % slots.size()];
            if (!s->live) {
                cursor_ = (cursor_ + i + 1) % slots.size();
                s->live = true;
                if (kSync && s->gen > 0) {  // reused: wait for the consumer that freed it
                    SimThisCore().pipes.WaitFlag(Pipes::consumer, Pipes::producer, Event(s.get()),
                                                 {"AllocTensor", at, Pipes::producer});
                }
                perf::Alloc(s.get(), pos == TPosition::VECIN);
                return LocalTensor<T>(s.get(), 0, s->bytes / sizeof(T));
            }
        }
        throw SimError("AllocTensor: all " + std::to_string(slots.size()) +
                       " buffers of the queue are in use (the core would wait forever) at " + bnb_rules::Where(at));
    }
    template <typename T>
    bool EnQue(const LocalTensor<T> &tensor, bnb_rules::Src at = bnb_rules::Here())
    {
        CheckOwned(tensor, "EnQue", at);
        SimCheck(static_cast<int32_t>(queued_.size()) < depth,
                 "EnQue: queue depth " + std::to_string(depth) + " exceeded", at);
        queued_.push_back(tensor.SimSlotPtr());
        if (kSync) {
            SimThisCore().pipes.SetFlag(Pipes::producer, Pipes::consumer, Event(tensor.SimSlotPtr()));
        }
        perf::EnQue(tensor.SimSlotPtr(), pos == TPosition::VECIN);
        return true;
    }
    template <typename T>
    LocalTensor<T> DeQue(bnb_rules::Src at = bnb_rules::Here())
    {
        SimCheck(!queued_.empty(), "DeQue: queue is empty (the core would wait forever)", at);
        SimSlot *s = queued_.front();
        queued_.pop_front();
        if (kSync) {
            SimThisCore().pipes.WaitFlag(Pipes::producer, Pipes::consumer, Event(s), {"DeQue", at, Pipes::consumer});
        }
        perf::DeQue(s, pos == TPosition::VECIN);
        return LocalTensor<T>(s, 0, s->bytes / sizeof(T));
    }
    template <typename T>
    void FreeTensor(LocalTensor<T> &tensor, bnb_rules::Src at = bnb_rules::Here())
    {
        CheckOwned(tensor, "FreeTensor", at);
        SimSlot *s = tensor.SimSlotPtr();
        for (auto *q : queued_) {
            SimCheck(q != s, "FreeTensor: tensor is still enqueued", at);
        }
        s->live = false;
        s->gen++;
        if (kSync) {
            SimThisCore().pipes.SetFlag(Pipes::consumer, Pipes::producer, Event(s));
        }
        perf::Free(s, pos == TPosition::VECIN);
    }

private:
    size_t cursor_ = 0;  // next buffer AllocTensor tries first
    // A queue buffer's own event id (kept apart from the kernel's event ids, which are small).
    static int64_t Event(const SimSlot *s) { return -int64_t(reinterpret_cast<uintptr_t>(s) >> 4); }
    template <typename T>
    void CheckOwned(const LocalTensor<T> &tensor, const char *op, bnb_rules::Src at)
    {
        SimSlot *s = tensor.SimSlotPtr();
        bool owned = false;
        for (auto &o : slots) {
            owned = owned || o.get() == s;
        }
        SimCheck(owned, std::string(op) + ": tensor does not belong to this queue", at);
        SimCheck(s->live && s->gen == tensor.SimGen(), std::string(op) + ": tensor was already freed", at);
    }
    std::deque<SimSlot *> queued_;
};

template <TPosition pos = TPosition::VECCALC>
class TBuf : public SimBufOwner {
public:
    template <typename T>
    LocalTensor<T> Get()
    {
        SimCheck(!slots.empty(), "TBuf::Get: TPipe::InitBuffer not called");
        return LocalTensor<T>(slots[0].get(), 0, slots[0]->bytes / sizeof(T));
    }
    template <typename T>
    LocalTensor<T> Get(uint32_t len)
    {
        LocalTensor<T> t = Get<T>();
        SimCheck(len <= t.GetSize(), "TBuf::Get: " + std::to_string(len) + " elements exceed the buffer");
        return LocalTensor<T>(slots[0].get(), 0, len);
    }
};

class TPipe {
public:
    TPipe()
    {
        SimPipePtr() = this;
        SimThisCore().ubUsed = 0;
    }
    ~TPipe()
    {
        if (SimPipePtr() == this) {
            SimPipePtr() = nullptr;
        }
    }
    template <TPosition qPos, int32_t depth, auto mask>
    bool InitBuffer(TQue<qPos, depth, mask> &que, uint8_t num, uint32_t len, bnb_rules::Src at = bnb_rules::Here())
    {
        SimCheck(num >= 1, "InitBuffer: buffer count must be at least 1", at);
        for (uint8_t i = 0; i < num; ++i) {
            que.slots.push_back(Carve(len, qPos, at));
        }
        return true;
    }
    template <TPosition bufPos>
    bool InitBuffer(TBuf<bufPos> &buf, uint32_t len, bnb_rules::Src at = bnb_rules::Here())
    {
        auto slot = Carve(len, bufPos, at);
        slot->live = true;
        buf.slots.push_back(std::move(slot));
        return true;
    }
    void Destroy() { SimThisCore().ubUsed = 0; }
    // An id of the event no AllocEventID holds now (the sim's queues use events of their own).
    int8_t FetchEventID(HardEvent evt)
    {
        const uint8_t used = eventsHeld_[static_cast<uint32_t>(evt)];
        for (int8_t i = 0; i < 8; ++i) {
            if (!(used >> i & 1)) return i;
        }
        throw SimError("FetchEventID: all 8 event ids of the event are held");
    }
    // Event ids held across other work (8 per event type, as the hardware has).
    template <HardEvent evt>
    TEventID AllocEventID()
    {
        uint8_t &used = eventsHeld_[static_cast<uint32_t>(evt)];
        for (int8_t i = 0; i < 8; ++i) {
            if (!(used >> i & 1)) {
                used = static_cast<uint8_t>(used | 1u << i);
                return i;
            }
        }
        throw SimError("AllocEventID: all 8 event ids of the event are held");
    }
    template <HardEvent evt>
    void ReleaseEventID(TEventID id)
    {
        uint8_t &used = eventsHeld_[static_cast<uint32_t>(evt)];
        SimCheck(id >= 0 && id < 8 && (used >> id & 1), "ReleaseEventID: event id not held");
        used = static_cast<uint8_t>(used & ~(1u << id));
    }

private:
    std::unique_ptr<SimSlot> Carve(uint32_t len, TPosition p, bnb_rules::Src at)
    {
        SimCore &core = SimThisCore();
        uint32_t aligned = (len + ONE_BLK_SIZE - 1) / ONE_BLK_SIZE * ONE_BLK_SIZE;
        SimCheck(len > 0, "InitBuffer: zero-length buffer", at);
        bnb_rules::UbCapacity(core.soc.name, core.ubUsed, aligned, core.ubBytes, at, core.soc.ubBytes);
        auto slot = std::make_unique<SimSlot>();
        slot->addr = core.ub + core.ubUsed;
        slot->bytes = aligned;
        slot->pos = p;
        core.ubUsed += aligned;
        return slot;
    }
    uint8_t eventsHeld_[static_cast<uint32_t>(HardEvent::MAX)] = {};
};

}  // namespace AscendC

// At global scope, as the real headers declare it (kernel_common.h).
inline AscendC::TPipe *GetTPipePtr() { return AscendC::SimPipePtr(); }
#endif
