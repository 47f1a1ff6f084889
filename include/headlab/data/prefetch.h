// Where training batches come from. With `background` (train.prefetch), while step s trains a
// thread fills the batch step s + 1 will ask for, so data generation is off the critical path;
// without it, get() fills the batch in the caller's thread. Batches are pure functions of
// (seed, split, index) (data/batch.h), so prefetching changes nothing in the results: a run
// with and without it is bit-identical. Two Batch buffers are allocated once; no allocation per
// batch. An exception thrown while filling (e.g. a mis-sized batch) is rethrown by get().
//   BatchPrefetcher batches(dataset, Split::train, 32, /*background=*/true);
//   for (step ...) { const Batch& b = batches.get(step); ... }   // b valid until the next get()
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>

#include "headlab/data/batch.h"

namespace headlab {

class BatchPrefetcher {
 public:
  BatchPrefetcher(const Dataset& dataset, Split split, int64_t batch_size, bool background);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // Batch `index` of the split; then starts filling `next` (default index + 1) in the
  // background. Asking for an index other than the one prefetched (the first call, a resume, no
  // background thread) fills it here instead.
  const Batch& get(int64_t index, int64_t next = -1);

  struct Stats {
    int64_t batches = 0;  // get() calls
    int64_t ready = 0;    // of them, batches that were complete when asked for
    double wait_s = 0;    // time get() spent waiting for the background fill
  };
  Stats stats() const { return stats_; }

 private:
  void worker();

  const Dataset& dataset_;
  Split split_;
  Batch buffers_[2];
  int current_ = 0;  // the buffer get() last returned; the worker fills the other one

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  int64_t pending_ = -1;  // the index the worker is filling (or has filled), -1 = none
  bool filling_ = false;  // the worker has a job it has not finished
  bool stop_ = false;
  std::exception_ptr error_;  // from the last fill
  Stats stats_;
  std::thread thread_;  // last: started (if background) after every other member exists
};

}  // namespace headlab
