// The pool threads' poll after a job (csrc/thread_pool.h, Loop), as a program: after back-to-back
// jobs a pool thread polls for the next one for a while, and while it polls it gives its CPU to any
// other thread that wants it (sched_yield), so a framework's operators that run right after our
// call are not slowed by it; then it sleeps. Linked with -Wl,--wrap=sched_yield, which counts the
// yields of the pool's threads. Then the same jobs as one kernel call that ends (CallEnded): the
// pool thread stops polling at once. Prints "<what> <value>" lines.
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "thread_pool.h"

namespace {
std::atomic<long> g_pool_yields{0};
std::thread::id g_caller;
}  // namespace

extern "C" int __real_sched_yield();
extern "C" int __wrap_sched_yield() {
  if (std::this_thread::get_id() != g_caller) g_pool_yields.fetch_add(1);
  return __real_sched_yield();
}

int main() {
  g_caller = std::this_thread::get_id();
  auto &pool = bn_grad::ThreadPool::Global();
  if (pool.Reserve(1) < 1) return 2;
  std::atomic<long> sink{0};
  for (int i = 0; i < 200; ++i) {  // back to back: the pool thread polls between them
    pool.Run(64, 2, [&](int64_t t) { sink.fetch_add(t); });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the poll ends within this
  const long after_poll = g_pool_yields.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // asleep: no more polls
  std::printf("yields_while_polling %ld\n", after_poll);
  std::printf("yields_after_the_poll %ld\n", g_pool_yields.load() - after_poll);
  // The same jobs, then the end of the kernel call they made up (CallEnded), which did not follow
  // another call closely: the pool thread stops polling at once.
  for (int i = 0; i < 200; ++i) {
    pool.Run(64, 2, [&](int64_t t) { sink.fetch_add(t); });
  }
  pool.CallEnded(std::chrono::steady_clock::now());
  const long at_call_end = g_pool_yields.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::printf("yields_after_a_call_end %ld\n", g_pool_yields.load() - at_call_end);
  std::printf("sum %ld\n", sink.load());
  return 0;
}
