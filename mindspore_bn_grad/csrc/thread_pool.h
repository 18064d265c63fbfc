// A persistent thread pool for the CPU kernels: no thread start-up per call.
//
//   bn_grad::ThreadPool::Global().Run(nthreads, [&](int tid, int nthreads) { ... });
//
// Run calls the function once for every tid in [0, nthreads) — tid 0 on the
// calling thread, the others on pool threads — and returns when all are done.
// Threads are created on first need and kept; after a job they spin briefly
// (so back-to-back calls do not pay a wake-up), then sleep.
//
// A Run issued while another is in progress (a nested call from inside a job,
// or a second caller thread) runs its tids one after another on the calling
// thread: jobs must not synchronise between their tids (no barriers inside),
// which also makes them safe to run serially. Results must never depend on
// which thread ran a tid (determinism is the job's business: see
// StaticRange for a partition that depends only on its arguments).
//
// No heap allocation per Run. Forked children get a fresh pool.
#ifndef MS_BN_GRAD_THREAD_POOL_H_
#define MS_BN_GRAD_THREAD_POOL_H_

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
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

namespace bn_grad {

// [begin, end) of `n` items for part `tid` of `parts` (contiguous, balanced).
inline void StaticRange(int64_t n, int tid, int parts, int64_t *begin, int64_t *end) {
  *begin = n * tid / parts;
  *end = n * (tid + 1) / parts;
}

class ThreadPool {
 public:
  static ThreadPool &Global() {
    static std::atomic<ThreadPool *> pool{nullptr};
    static std::mutex create_mu;
    ThreadPool *p = pool.load(std::memory_order_acquire);
    if (p == nullptr || p->pid_ != getpid()) {
      std::lock_guard<std::mutex> lk(create_mu);
      p = pool.load(std::memory_order_relaxed);
      if (p == nullptr || p->pid_ != getpid()) {
        // Never destroyed: worker threads may outlive static destruction at
        // exit, and a forked child's copy has no threads to join (leaked).
        p = new ThreadPool();
        pool.store(p, std::memory_order_release);
      }
    }
    return *p;
  }

  template <class F>
  void Run(int nthreads, F &&fn) {
    using Fn = std::remove_reference_t<F>;
    RunImpl(nthreads, [](void *ctx, int tid, int n) { (*static_cast<Fn *>(ctx))(tid, n); },
            const_cast<void *>(static_cast<const void *>(&fn)));
  }

 private:
  using Call = void (*)(void *, int, int);
  // After a job, workers poll for the next one this long before sleeping:
  // long enough to bridge the gap between back-to-back kernel calls, short
  // enough not to hold a core while the framework works in between.
  static constexpr auto kSpinTime = std::chrono::microseconds(300);
  static constexpr int kSpinIters = 1 << 12;  // caller: pauses before yielding

  ThreadPool() : pid_(getpid()) {}

  void RunImpl(int nthreads, Call call, void *ctx) {
    if (nthreads <= 1) { call(ctx, 0, 1); return; }
    std::unique_lock<std::mutex> run_lock(run_mu_, std::try_to_lock);
    if (!run_lock.owns_lock()) {  // nested or concurrent: serial on this thread
      for (int t = 0; t < nthreads; ++t) call(ctx, t, nthreads);
      return;
    }
    EnsureWorkers(nthreads - 1);
    const int nworkers = static_cast<int>(workers_.size());
    call_ = call;
    ctx_ = ctx;
    job_threads_ = nthreads;
    pending_.store(nworkers, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(mu_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    if (sleepers_.load(std::memory_order_acquire) > 0) cv_.notify_all();
    call(ctx, 0, nthreads);
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
      if (spins < kSpinIters) BN_GRAD_CPU_RELAX(); else std::this_thread::yield();
    }
  }

  void EnsureWorkers(int n) {
    while (static_cast<int>(workers_.size()) < n) {
      const int idx = static_cast<int>(workers_.size());
      workers_.emplace_back([this, idx, seen = generation_.load()] { Loop(idx, seen); });
      workers_.back().detach();
    }
  }

  // Every worker acknowledges every generation (pending_ counts all workers),
  // so none can miss a job or read a later job's fields for an earlier one.
  void Loop(int idx, uint64_t seen) {
    for (;;) {
      uint64_t g;
      int spins = 0;
      auto spin_start = std::chrono::steady_clock::now();
      while ((g = generation_.load(std::memory_order_acquire)) == seen) {
        BN_GRAD_CPU_RELAX();
        if ((++spins & 255) != 0 || std::chrono::steady_clock::now() - spin_start < kSpinTime) continue;
        std::unique_lock<std::mutex> lk(mu_);
        sleepers_.fetch_add(1, std::memory_order_acq_rel);
        cv_.wait(lk, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_acq_rel);
        spin_start = std::chrono::steady_clock::now();
      }
      seen = g;
      const int tid = idx + 1;
      if (tid < job_threads_) call_(ctx_, tid, job_threads_);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  const pid_t pid_;
  std::mutex run_mu_;                 // one job at a time
  std::mutex mu_;                     // with cv_: sleeping workers
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};
  Call call_ = nullptr;
  void *ctx_ = nullptr;
  int job_threads_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace bn_grad

#endif  // MS_BN_GRAD_THREAD_POOL_H_
