// A persistent thread pool for the CPU kernels: no thread start-up per call.
//
//   bn_grad::ThreadPool::Global().Run(ntasks, nthreads, [&](int64_t task) { ... });
//
// Run calls fn(task) once for every task in [0, ntasks) and returns when all
// are done. Tasks are claimed dynamically by the calling thread and by up to
// nthreads - 1 pool threads: a pool thread that is slow to wake (machine
// busy, or asleep) does not hold the call up, the caller simply takes the
// remaining tasks. So a task may run on any thread, and one thread may run
// several: results must not depend on which thread ran a task (for
// determinism, make the tasks depend only on the problem, e.g. with
// StaticRange, never on the thread count).
//
// Pool threads are created on first need (or by Reserve) and kept; if the OS
// refuses one, Run goes on with the threads it has (results do not depend on
// the thread count) and Reserve reports it. Nothing spins for long inside a
// framework: MindSpore runs its own kernels on the same cores between our
// calls, and a spinning thread takes a core from them.
//  * After a job, pool threads poll for the next one only while jobs come
//    back to back (the last gap between two jobs was under kSpinTime: the
//    phases of one kernel call, or calls in a benchmark loop); otherwise they
//    sleep at once. When a kernel call ends (CallEnded, from num_threads.h's
//    CallThreads) they stop polling unless calls too come back to back: in a
//    framework its next operators run right after our call, on its own
//    threads, and a polling thread would take a core from them. While they
//    poll they also yield the CPU every few polls.
//  * The caller, once no task is left to claim, polls briefly (kTailSpin) for
//    the tasks other threads still run, then sleeps until the last one ends.
//    A yielding caller would keep its core busy, so the scheduler would never
//    move a pool thread that another process or a framework thread preempted
//    there; a sleeping one leaves its core idle and the kernel pulls it over.
//  * When the caller still waited that way longer than it worked itself (a
//    pool thread was preempted holding a task: more runnable threads than
//    CPUs), the next jobs run on the caller alone for a while (Stalled).
// A Run issued while another is in progress (nested inside a task, or from a
// second caller thread) runs its tasks serially on its calling thread. No
// heap allocation per Run. A forked child gets a fresh pool.
#ifndef MS_BN_GRAD_THREAD_POOL_H_
#define MS_BN_GRAD_THREAD_POOL_H_

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BN_GRAD_CPU_RELAX() _mm_pause()
#else
#define BN_GRAD_CPU_RELAX() std::this_thread::yield()
#endif

// A test may define it to delay a pool thread between seeing a job and taking its ticket.
#ifndef BN_GRAD_POOL_BEFORE_TICKET
#define BN_GRAD_POOL_BEFORE_TICKET()
#endif

namespace bn_grad {

// [begin, end) of part `k` of `parts` over n items (contiguous, balanced).
inline void StaticRange(int64_t n, int64_t k, int64_t parts, int64_t *begin, int64_t *end) {
  *begin = n * k / parts;
  *end = n * (k + 1) / parts;
}

// Hidden: the pool (a static local of an inline function) is otherwise a
// process-wide GNU "unique" symbol, so two builds of this library loaded in
// one process (say, another MS_BN_GRAD_CXXFLAGS) would share one pool object
// of two different layouts.
class __attribute__((visibility("hidden"))) ThreadPool {
 public:
  static constexpr int64_t kMaxTasks = (int64_t{1} << 21) - 1;

  static ThreadPool &Global() {
    static std::atomic<ThreadPool *> pool{nullptr};
    static std::mutex create_mu;
    ThreadPool *p = pool.load(std::memory_order_acquire);
    if (p == nullptr || p->pid_ != getpid()) {
      std::lock_guard<std::mutex> lk(create_mu);
      p = pool.load(std::memory_order_relaxed);
      if (p == nullptr || p->pid_ != getpid()) {
        // Never destroyed: pool threads may outlive static destruction at
        // exit, and a forked child's copy has no threads to join (leaked).
        p = new ThreadPool();
        pool.store(p, std::memory_order_release);
      }
    }
    return *p;
  }

  // Starts pool threads until there are n; returns how many there are (fewer
  // when the OS refuses to start one).
  int Reserve(int n) {
    std::lock_guard<std::mutex> lk(run_mu_);
    return EnsureWorkers(n);
  }

  // A kernel call that began at `start` has ended (its last job is done): pool threads stop polling
  // for the next job unless the previous call ended less than kSpinTime before this one began.
  void CallEnded(std::chrono::steady_clock::time_point start) {
    const int64_t now = Nanos(std::chrono::steady_clock::now());
    const int64_t previous_end = last_call_end_ns_.exchange(now, std::memory_order_relaxed);
    if (Nanos(start) - previous_end >= std::chrono::nanoseconds(kSpinTime).count()) {
      spin_after_job_.store(false, std::memory_order_relaxed);
    }
  }

  // How many of the next jobs run on their caller alone after a stall (Stalled); for tests.
  int SerialJobsLeft() {
    std::lock_guard<std::mutex> lk(run_mu_);
    return serial_runs_left_;
  }

  // fn(task) for task in [0, ntasks) (ntasks <= kMaxTasks), on up to nthreads threads.
  template <class F>
  void Run(int64_t ntasks, int nthreads, F &&fn) {
    using Fn = std::remove_reference_t<F>;
    RunImpl(ntasks, nthreads, [](void *ctx, int64_t task) { (*static_cast<Fn *>(ctx))(task); },
            const_cast<void *>(static_cast<const void *>(&fn)));
  }

 private:
  using Call = void (*)(void *, int64_t);
  // After a job, pool threads poll this long before sleeping, but only while
  // jobs come back to back (a gap under kSpinTime): see the header.
  static constexpr auto kSpinTime = std::chrono::microseconds(300);
  static int64_t Nanos(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  // The caller polls this long for the other threads' last tasks, then sleeps.
  static constexpr auto kTailSpin = std::chrono::microseconds(30);
  // A wait this long for other threads' tasks, and longer than the caller's own share: a stall.
  static constexpr auto kStallMin = std::chrono::microseconds(200);
  static constexpr int kMinSerialRuns = 16, kMaxSerialRuns = 1024;

  // state_ packs generation (22 bits) | ntasks (21 bits) | next task (21 bits),
  // so claiming a task (a CAS) is tied to the job it belongs to.
  static constexpr int kTaskBits = 21;
  static constexpr uint64_t kTaskMask = (uint64_t{1} << kTaskBits) - 1;
  static uint64_t Gen(uint64_t s) { return s >> (2 * kTaskBits); }
  static int64_t NTasks(uint64_t s) { return static_cast<int64_t>((s >> kTaskBits) & kTaskMask); }
  static int64_t Next(uint64_t s) { return static_cast<int64_t>(s & kTaskMask); }
  static constexpr uint64_t kGenMask = (uint64_t{1} << (64 - 2 * kTaskBits)) - 1;

  // tickets_ packs the generation of the job they belong to (high half) | how many are left (low
  // half). A pool thread that woke for a job but was preempted before taking its ticket must not
  // spend the next job's ticket on the old job (which has no task left): that job would then run
  // without it.
  static uint64_t Tickets(uint64_t gen, int n) { return (gen << 32) | static_cast<uint32_t>(n); }
  bool TakeTicket(uint64_t gen) {
    uint64_t t = tickets_.load(std::memory_order_acquire);
    while ((t >> 32) == gen && static_cast<uint32_t>(t) > 0) {
      if (tickets_.compare_exchange_weak(t, t - 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        return true;
      }
    }
    return false;
  }

  ThreadPool() : pid_(getpid()) {}

  void RunImpl(int64_t ntasks, int nthreads, Call call, void *ctx) {
    if (ntasks <= 0) return;
    nthreads = static_cast<int>(std::min<int64_t>(nthreads, ntasks));
    std::unique_lock<std::mutex> run_lock(run_mu_, std::defer_lock);
    if (nthreads > 1 && ntasks <= kMaxTasks && run_lock.try_lock()) {
      nthreads = std::min(nthreads, EnsureWorkers(nthreads - 1) + 1);
      if (serial_runs_left_ > 0) {  // a recent job stalled on a preempted pool thread: see Stalled
        --serial_runs_left_;
        nthreads = 1;
      }
    }
    if (nthreads <= 1 || !run_lock.owns_lock()) {
      for (int64_t t = 0; t < ntasks; ++t) call(ctx, t);  // serial (also: nested/concurrent)
      return;
    }
    call_ = call;
    ctx_ = ctx;
    done_.store(0, std::memory_order_relaxed);
    // Back-to-back calls keep the pool threads polling after this job; a
    // framework's calls, with its own work in between, let them sleep.
    spin_after_job_.store(std::chrono::steady_clock::now() - last_job_end_ < kSpinTime,
                          std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(mu_);
      const uint64_t gen = (Gen(state_.load(std::memory_order_relaxed)) + 1) & kGenMask;
      // The tickets before the job: a pool thread that sees the job's generation sees its tickets.
      tickets_.store(Tickets(gen, nthreads - 1), std::memory_order_relaxed);
      state_.store((gen << (2 * kTaskBits)) | (static_cast<uint64_t>(ntasks) << kTaskBits),
                   std::memory_order_seq_cst);
    }
    if (sleepers_.load(std::memory_order_seq_cst) > 0) cv_.notify_all();
    const uint64_t gen = Gen(state_.load(std::memory_order_relaxed));
    const auto t0 = std::chrono::steady_clock::now();
    Work(gen);
    const auto t1 = std::chrono::steady_clock::now();
    WaitDone(ntasks);
    last_job_end_ = std::chrono::steady_clock::now();
    Stalled(t1 - t0, last_job_end_ - t1);
  }

  // The caller waited for the last tasks of other threads longer than it worked itself: with
  // tasks of equal size that happens when a pool thread holding one was preempted (more runnable
  // threads than CPUs: a framework's own threads, another process), and the job then ends only
  // when the scheduler runs that thread again. The next jobs run on the calling thread alone,
  // for kMinSerialRuns jobs, twice as many after each stall in a row (up to kMaxSerialRuns),
  // then one job tries the pool again. Results never depend on the thread count.
  void Stalled(std::chrono::steady_clock::duration own, std::chrono::steady_clock::duration tail) {
    if (tail > kStallMin && tail > own) {
      serial_runs_left_ = serial_backoff_;
      serial_backoff_ = std::min(2 * serial_backoff_, kMaxSerialRuns);
    } else {
      serial_backoff_ = kMinSerialRuns;
    }
  }

  // Returns once all ntasks of the current job are done: polls kTailSpin,
  // then sleeps on done_cv_ (the thread finishing the last task wakes it).
  void WaitDone(int64_t ntasks) {
    if (done_.load(std::memory_order_acquire) == ntasks) return;
    const auto start = std::chrono::steady_clock::now();
    for (int spins = 1;; ++spins) {
      if (done_.load(std::memory_order_acquire) == ntasks) return;
      BN_GRAD_CPU_RELAX();
      if ((spins & 63) == 0 && std::chrono::steady_clock::now() - start >= kTailSpin) break;
    }
    caller_waiting_.store(true, std::memory_order_seq_cst);
    {
      std::unique_lock<std::mutex> lk(done_mu_);
      done_cv_.wait(lk, [&] { return done_.load(std::memory_order_seq_cst) == ntasks; });
    }
    caller_waiting_.store(false, std::memory_order_relaxed);
  }

  // Claims and runs tasks of job `gen` until none is left.
  void Work(uint64_t gen) {
    uint64_t s = state_.load(std::memory_order_acquire);
    while (Gen(s) == gen && Next(s) < NTasks(s)) {
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        call_(ctx_, Next(s));  // the job cannot end (and call_ change) before done_ counts this task
        if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == NTasks(s) &&
            caller_waiting_.load(std::memory_order_seq_cst)) {
          std::lock_guard<std::mutex> lk(done_mu_);  // the caller checks done_ under this lock
          done_cv_.notify_one();
        }
        s = state_.load(std::memory_order_acquire);
      }
    }
  }

  // Called with run_mu_ held. Never throws: a thread the OS refuses
  // (std::system_error) or memory for its handle (std::bad_alloc) ends the loop.
  int EnsureWorkers(int n) noexcept {
    while (static_cast<int>(workers_.size()) < n) {
      const uint64_t seen = Gen(state_.load());
      try {
        workers_.emplace_back([this, seen] { Loop(seen); });
      } catch (const std::exception &) {
        break;
      }
      workers_.back().detach();
    }
    return static_cast<int>(workers_.size());
  }

  void Loop(uint64_t seen) {
    for (;;) {
      uint64_t s;
      auto spin_start = std::chrono::steady_clock::now();
      bool spin = spin_after_job_.load(std::memory_order_relaxed);
      for (int spins = 0; Gen(s = state_.load(std::memory_order_acquire)) == seen;) {
        if (spin) {
          if ((++spins & 15) != 0) {
            BN_GRAD_CPU_RELAX();
            continue;
          }
          if (spin_after_job_.load(std::memory_order_relaxed)) {  // (cleared when the call ended)
            std::this_thread::yield();  // (on a busy machine this may be a whole time slice: check the time)
            if (std::chrono::steady_clock::now() - spin_start < kSpinTime) continue;
          }
        }
        std::unique_lock<std::mutex> lk(mu_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        cv_.wait(lk, [&] { return Gen(state_.load(std::memory_order_seq_cst)) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_seq_cst);
        spin_start = std::chrono::steady_clock::now();
      }
      seen = Gen(s);
      BN_GRAD_POOL_BEFORE_TICKET();  // (a test's hook: nothing in the library)
      // At most nthreads - 1 pool threads join a job (the pool may be larger).
      if (TakeTicket(seen)) Work(seen);
    }
  }

  const pid_t pid_;
  std::mutex run_mu_;  // one job at a time
  std::mutex mu_;      // with cv_: sleeping pool threads
  std::condition_variable cv_;
  std::atomic<uint64_t> state_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<uint64_t> tickets_{0};  // Tickets(generation, left)
  std::atomic<int> sleepers_{0};
  std::atomic<bool> spin_after_job_{true};   // the last gap between jobs was short (and the call goes on)
  std::atomic<int64_t> last_call_end_ns_{0};  // CallEnded
  std::chrono::steady_clock::time_point last_job_end_{};  // under run_mu_
  int serial_runs_left_ = 0;                  // under run_mu_: see Stalled
  int serial_backoff_ = kMinSerialRuns;       // under run_mu_
  std::mutex done_mu_;                        // with done_cv_: the caller waiting for the tail
  std::condition_variable done_cv_;
  std::atomic<bool> caller_waiting_{false};
  Call call_ = nullptr;
  void *ctx_ = nullptr;
  std::vector<std::thread> workers_;
};

}  // namespace bn_grad

#endif  // MS_BN_GRAD_THREAD_POOL_H_
