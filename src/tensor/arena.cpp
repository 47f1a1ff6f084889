#include "headlab/tensor/arena.h"

#include <atomic>
#include <cstdlib>
#include <new>
#include <utility>

namespace headlab {

namespace {
std::atomic<int64_t> system_allocation_count{0};

size_t round_up(size_t bytes) {
  return (bytes + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
}
}  // namespace

int64_t tensor_system_allocations() {
  return system_allocation_count.load();
}

Buffer::Buffer(size_t bytes) : bytes_(round_up(bytes)) {
  if (bytes_ == 0) return;
  data_ = std::aligned_alloc(kTensorAlignment, bytes_);
  HEADLAB_CHECK(data_ != nullptr, "out of memory allocating " << bytes_ << " bytes for tensors");
  ++system_allocation_count;
}

Buffer::~Buffer() {
  std::free(data_);
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

Arena::Arena(size_t initial_bytes) {
  blocks_.reserve(16);
  if (initial_bytes) blocks_.emplace_back(initial_bytes);
}

void* Arena::allocate_bytes(size_t bytes) {
  bytes = round_up(bytes == 0 ? 1 : bytes);
  if (blocks_.empty() || used_in_last_ + bytes > blocks_.back().bytes()) {
    // Overflow: open a new block at least as large as everything so far, so a growing
    // workload needs O(log) blocks before reset() merges them.
    size_t block_bytes = std::max(bytes, std::max<size_t>(capacity(), size_t(1) << 20));
    blocks_.emplace_back(block_bytes);
    used_in_last_ = 0;
  }
  void* p = static_cast<char*>(blocks_.back().data()) + used_in_last_;
  used_in_last_ += bytes;
  used_total_ += bytes;
  if (used_total_ > peak_total_) peak_total_ = used_total_;
  return p;
}

void Arena::reset() {
  if (blocks_.size() > 1) {
    // Replace the blocks by one that holds the peak, so the next step needs no system call.
    blocks_.clear();
    blocks_.emplace_back(peak_total_);
  }
  used_in_last_ = 0;
  used_total_ = 0;
}

size_t Arena::capacity() const {
  size_t total = 0;
  for (const Buffer& b : blocks_) total += b.bytes();
  return total;
}

}  // namespace headlab
