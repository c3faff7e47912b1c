// Waiting with a time limit, for tests that run on real time: sockets, threads, hosts (the
// engine's tests need none: they pass time as an argument).
#pragma once

#include <chrono>
#include <thread>

namespace test {

// Waits until `done()` holds, for `limit` at most; returns whether it held.
template <class F>
bool eventually(F&& done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

}  // namespace test
