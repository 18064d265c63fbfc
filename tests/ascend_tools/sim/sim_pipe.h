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
// FreeTensor/AllocTensor MTE3 -> V. Each hand-over sets and waits on the id it took from the TPipe's pool.
template <TPosition pos>
struct SimQueuePipes {
    static constexpr bool in = pos == TPosition::VECIN, out = pos == TPosition::VECOUT;
    static constexpr int producer = in ? bnb_hazards::MTE2 : bnb_hazards::V;
    static constexpr int consumer = in ? bnb_hazards::V : bnb_hazards::MTE3;
    // The HardEvents whose ids EnQue and FreeTensor take from the pipe's pool (bnb_rules::QueMaxEvent).
    static constexpr HardEvent enQueEvt = in ? HardEvent::MTE2_V : HardEvent::V_MTE3;
    static constexpr HardEvent freeBufEvt = in ? HardEvent::V_MTE2 : HardEvent::MTE3_V;
};

// An event id from the current TPipe's pool for a queue buffer, and its return (defined after TPipe).
inline int8_t SimQueueTakeEventID(HardEvent evt, const char *op, bnb_rules::Src at);
inline void SimQueueReturnEventID(HardEvent evt, int8_t &id);

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
                    SimThisCore().pipes.WaitFlag(Pipes::consumer, Pipes::producer, Event(s.get(), s->freeEvtId),
                                                 {"AllocTensor", at, Pipes::producer});
                }
                if (kSync) SimQueueReturnEventID(Pipes::freeBufEvt, s->freeEvtId);
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
            SimSlot *s = tensor.SimSlotPtr();
            s->enQueEvtId = SimQueueTakeEventID(Pipes::enQueEvt, "EnQue", at);
            SimThisCore().pipes.SetFlag(Pipes::producer, Pipes::consumer, Event(s, s->enQueEvtId),
                                        {"EnQue", at, Pipes::producer});
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
            SimThisCore().pipes.WaitFlag(Pipes::producer, Pipes::consumer, Event(s, s->enQueEvtId),
                                         {"DeQue", at, Pipes::consumer});
            SimQueueReturnEventID(Pipes::enQueEvt, s->enQueEvtId);
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
            s->freeEvtId = SimQueueTakeEventID(Pipes::freeBufEvt, "FreeTensor", at);
            SimThisCore().pipes.SetFlag(Pipes::consumer, Pipes::producer, Event(s, s->freeEvtId),
                                        {"FreeTensor", at, Pipes::consumer});
        }
        perf::Free(s, pos == TPosition::VECIN);
    }

private:
    size_t cursor_ = 0;  // next buffer AllocTensor tries first
    // The event id a hand-over of buffer s sets and waits on: the id it took from the pipe's pool, as the
    // real TQue, so a kernel's SetFlag / WaitFlag on an id a queue holds meets the queue's pending set;
    // without a pipe, an id of the buffer's own.
    static int64_t Event(const SimSlot *s, int8_t id)
    {
        return id >= 0 ? int64_t(id) : -int64_t(reinterpret_cast<uintptr_t>(s) >> 4);
    }
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
    // The pool of event ids of each HardEvent: QUE_MAX_EVENT of the core (bnb_rules::QueMaxEvent), shared
    // by the kernel's AllocEventID / FetchEventID and the queues' EnQue / FreeTensor, as in the real TPipe.
    int SimMaxEventIds() const { return bnb_rules::QueMaxEvent(SimThisCore().soc.npuArch); }
    int8_t SimTakeEventID(HardEvent evt, const char *op, bnb_rules::Src at)
    {
        uint8_t &used = eventsHeld_[static_cast<uint32_t>(evt)];
        const int8_t i = SimFirstFree(evt, used, op, at);
        used = static_cast<uint8_t>(used | 1u << i);
        return i;
    }
    void SimReturnEventID(HardEvent evt, TEventID id, const char *op)
    {
        uint8_t &used = eventsHeld_[static_cast<uint32_t>(evt)];
        SimCheck(id >= 0 && id < SimMaxEventIds() && (used >> id & 1), std::string(op) + ": event id not held");
        used = static_cast<uint8_t>(used & ~(1u << id));
    }
    // An id of the event nothing holds now (TPipe::FetchEventID: the lowest free one).
    int8_t FetchEventID(HardEvent evt, bnb_rules::Src at = bnb_rules::Here())
    {
        return SimFirstFree(evt, eventsHeld_[static_cast<uint32_t>(evt)], "FetchEventID", at);
    }
    // Event ids held across other work.
    template <HardEvent evt>
    TEventID AllocEventID(bnb_rules::Src at = bnb_rules::Here())
    {
        return SimTakeEventID(evt, "AllocEventID", at);
    }
    template <HardEvent evt>
    void ReleaseEventID(TEventID id)
    {
        SimReturnEventID(evt, id, "ReleaseEventID");
    }

private:
    static std::string SimEventName(HardEvent evt)
    {
        static const char *names[] = {"MTE2_MTE1", "MTE1_MTE2", "MTE1_M", "M_MTE1", "MTE2_V", "V_MTE2", "MTE3_V",
                                      "V_MTE3", "M_V", "V_M", "V_V", "MTE3_MTE1", "MTE1_MTE3", "MTE1_V", "MTE2_M",
                                      "M_MTE2", "V_MTE1", "M_FIX", "FIX_M", "MTE3_MTE2", "MTE2_MTE3", "S_V", "V_S",
                                      "S_MTE2", "MTE2_S", "S_MTE3", "MTE3_S", "MTE2_FIX", "FIX_MTE2", "FIX_S", "M_S",
                                      "FIX_MTE3"};
        const auto i = static_cast<uint32_t>(evt);
        return i < sizeof(names) / sizeof(names[0]) ? names[i] : "event " + std::to_string(i);
    }
    int8_t SimFirstFree(HardEvent evt, uint8_t used, const char *op, bnb_rules::Src at) const
    {
        const int max = SimMaxEventIds();
        for (int8_t i = 0; i < max; ++i) {
            if (!(used >> i & 1)) return i;
        }
        throw SimError(std::string(op) + ": all " + std::to_string(max) + " event ids of " + SimEventName(evt) + " are held on " +
                       SimThisCore().soc.name + " (QUE_MAX_EVENT; enqueued and freed queue buffers hold theirs) at " +
                       bnb_rules::Where(at));
    }
    std::unique_ptr<SimSlot> Carve(uint32_t len, TPosition p, bnb_rules::Src at)
    {
        SimCore &core = SimThisCore();
        uint32_t aligned = (len + ONE_BLK_SIZE - 1) / ONE_BLK_SIZE * ONE_BLK_SIZE;
        SimCheck(len > 0, "InitBuffer: zero-length buffer", at);
        // The real TPipe manages at most QBUF_MAX_LEN buffers, TQue and TBuf ones together
        // (impl/basic_api/kernel_macros.h; TPipe::InitBuffer asserts it, kernel_tpipe_impl.h).
        SimCheck(++buffers_ <= kMaxBuffers, "InitBuffer: more than " + std::to_string(kMaxBuffers) +
                                                " buffers in one TPipe (QBUF_MAX_LEN)", at);
        bnb_rules::UbCapacity(core.soc.name, core.ubUsed, aligned, core.ubBytes, at, core.soc.ubBytes);
        auto slot = std::make_unique<SimSlot>();
        slot->addr = core.ub + core.ubUsed;
        slot->bytes = aligned;
        slot->pos = p;
        core.ubUsed += aligned;
        return slot;
    }
    uint8_t eventsHeld_[static_cast<uint32_t>(HardEvent::MAX)] = {};
    static constexpr int kMaxBuffers = 64;
    int buffers_ = 0;
};

inline int8_t SimQueueTakeEventID(HardEvent evt, const char *op, bnb_rules::Src at)
{
    TPipe *pipe = SimPipePtr();
    return pipe ? pipe->SimTakeEventID(evt, op, at) : int8_t(-1);
}
inline void SimQueueReturnEventID(HardEvent evt, int8_t &id)
{
    TPipe *pipe = SimPipePtr();
    if (pipe && id >= 0) pipe->SimReturnEventID(evt, id, "TQue");
    id = -1;
}

}  // namespace AscendC

// At global scope, as the real headers declare it (kernel_common.h).
inline AscendC::TPipe *GetTPipePtr() { return AscendC::SimPipePtr(); }
#endif
