#include "headlab/data/prefetch.h"

#include <chrono>
#include <utility>

namespace headlab {

BatchPrefetcher::BatchPrefetcher(const Dataset& dataset, Split split, int64_t batch_size, bool background)
    : dataset_(dataset), split_(split), buffers_{dataset.make_batch(batch_size), dataset.make_batch(batch_size)} {
  if (background) thread_ = std::thread([this] { worker(); });
}

BatchPrefetcher::~BatchPrefetcher() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

const Batch& BatchPrefetcher::get(int64_t index, int64_t next_index) {
  const int next = 1 - current_;
  std::unique_lock<std::mutex> lock(mutex_);
  ++stats_.batches;
  if (pending_ == index) {
    if (filling_) {
      const auto start = std::chrono::steady_clock::now();
      done_.wait(lock, [this] { return !filling_; });
      stats_.wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } else {
      ++stats_.ready;
    }
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  } else {
    // Not what was prefetched (first call, or a jump): let any fill in flight finish (it writes
    // buffers_[next]), then fill this index here.
    done_.wait(lock, [this] { return !filling_; });
    error_ = nullptr;
    dataset_.fill_batch(split_, index, buffers_[next]);
  }
  current_ = next;
  if (!thread_.joinable()) return buffers_[current_];
  pending_ = next_index >= 0 ? next_index : index + 1;
  filling_ = true;
  lock.unlock();
  wake_.notify_one();
  return buffers_[current_];
}

void BatchPrefetcher::worker() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || filling_; });
    if (stop_) return;
    const int64_t index = pending_;
    Batch& out = buffers_[1 - current_];
    lock.unlock();
    std::exception_ptr error;
    try {
      dataset_.fill_batch(split_, index, out);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    filling_ = false;
    done_.notify_one();
  }
}

}  // namespace headlab
