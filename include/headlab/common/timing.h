// Clocks in seconds and the median of timings: one definition for the trainer's throughput, the
// bench verb and the benchmarks in bench/, so that every reported time is measured the same way.
//   const double t0 = wall_seconds();  ...;  times.push_back(wall_seconds() - t0);  median(times);
#pragma once

#include <time.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace headlab {

// Monotonic wall-clock seconds (steady_clock: unaffected by changes of the system time).
inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU seconds used by this process, all threads.
inline double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The median; for an even count the mean of the middle two (Python's statistics.median, which the
// Python side of the benchmarks uses). `v` must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace headlab
