// One job on the CPU kernels' thread pool (csrc/thread_pool.h), for the pool's test programs: 64
// tasks on up to 2 threads; each task is counted and its thread recorded, then body(on_caller)
// runs in it (on_caller: the task runs on the thread that called Run). Returns how many threads
// ran the job's tasks; *ok becomes false when a task ran other than once.
#ifndef MS_BN_GRAD_TESTS_POOL_JOB_H_
#define MS_BN_GRAD_TESTS_POOL_JOB_H_

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "thread_pool.h"

namespace pool_test {

constexpr int kTasks = 64;

template <class Body>
size_t Job(Body body, bool *ok) {
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::vector<std::atomic<int>> runs(kTasks);
  bn_grad::ThreadPool::Global().Run(kTasks, 2, [&](int64_t t) {
    runs[t].fetch_add(1);
    {
      std::lock_guard<std::mutex> lk(mu);
      ids.insert(std::this_thread::get_id());
    }
    body(std::this_thread::get_id() == caller);
  });
  for (auto &r : runs) *ok = *ok && r.load() == 1;
  return ids.size();
}

// The pool with a thread beside the caller, after warm-up jobs (warm()): at least five, and more until
// the stall fallback's count is used up (on a busy machine a warm-up job may stall too: a pool
// thread preempted in it), so the next job is offered the pool. nullptr when the OS refuses the thread.
template <class Warm>
bn_grad::ThreadPool *WarmedPool(Warm warm) {
  auto &pool = bn_grad::ThreadPool::Global();
  if (pool.Reserve(1) < 1) return nullptr;
  for (int i = 0; i < 5 || (pool.SerialJobsLeft() > 0 && i < 5000); ++i) warm();
  return &pool;
}

}  // namespace pool_test

#endif  // MS_BN_GRAD_TESTS_POOL_JOB_H_
