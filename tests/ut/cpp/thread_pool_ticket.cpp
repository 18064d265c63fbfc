// A pool thread that saw a job but was preempted before taking its ticket (csrc/thread_pool.h,
// Loop), as a program. The test hook holds the pool thread there, once; the caller's tasks of that
// job wait until it is held, so the caller ends that job alone and starts the next one while it is.
// The next job's tasks wait (2 s in all) for a pool thread to run one of them: the held thread must
// join it once it is let go, not spend that job's ticket on the old one. Prints "<what> <value>"
// lines; every task must run exactly once in every job (exit 1 otherwise).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

namespace {
std::atomic<bool> g_hold_once{false}, g_held{false};
// Holds a pool thread (the only caller of the hook) long enough for the caller to end the job it
// saw and start the next one.
void HoldOnce() {
  if (!g_hold_once.exchange(false)) return;
  g_held.store(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}
}  // namespace

#define BN_GRAD_POOL_BEFORE_TICKET() HoldOnce()
#include "pool_job.h"

namespace {

enum class Wait { kNone, kHeld, kPoolTask };

// One job; returns how many threads ran its tasks. The caller's tasks wait (2 s in all) until the
// pool thread is held by the hook (kHeld) or has run a task of this job (kPoolTask).
size_t Job(Wait wait, bool *ok) {
  std::atomic<bool> joined{false};
  const std::atomic<bool> *until = wait == Wait::kHeld ? &g_held : wait == Wait::kPoolTask ? &joined : nullptr;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  return pool_test::Job([&](bool on_caller) {
    if (!on_caller) {
      joined.store(true);
      return;
    }
    while (until != nullptr && !until->load() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
    }
  }, ok);
}

}  // namespace

int main() {
  bool ok = true;
  if (pool_test::WarmedPool([&] { Job(Wait::kNone, &ok); }) == nullptr) return 2;
  g_hold_once.store(true);
  std::printf("held_job_threads %zu\n", Job(Wait::kHeld, &ok));
  std::printf("held %d\n", g_held.load() ? 1 : 0);
  std::printf("next_job_threads %zu\n", Job(Wait::kPoolTask, &ok));
  return ok ? 0 : 1;
}
