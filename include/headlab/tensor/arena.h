// Memory for tensors. Every system allocation of tensor memory goes through aligned_alloc_bytes
// and bumps one process-wide counter, tensor_system_allocations(), so a test can check that a
// warmed-up training step allocates nothing.
//   Buffer: owns one 64-byte-aligned block for the life of a run (parameters, optimizer state).
//   Arena:  bump allocator for per-step activations and gradients. reset() recycles everything;
//           if a step overflowed the first block, reset() merges the blocks into one big enough,
//           so from the next step on the arena never touches the system allocator again.
//   Arena arena; auto x = arena.zeros<float>({B, T, C}); ... arena.reset();
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "headlab/tensor/tensor.h"

namespace headlab {

inline constexpr size_t kTensorAlignment = 64;

int64_t tensor_system_allocations();

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class Arena {
 public:
  explicit Arena(size_t initial_bytes = 0);

  void* allocate_bytes(size_t bytes);  // 64-byte aligned, uninitialised
  template <typename T>
  Tensor<T> empty(const Shape& shape) {
    return Tensor<T>(static_cast<T*>(allocate_bytes(shape.numel() * sizeof(T))), shape);
  }
  template <typename T>
  Tensor<T> zeros(const Shape& shape) {
    Tensor<T> t = empty<T>(shape);
    t.fill(T(0));
    return t;
  }

  void reset();
  size_t bytes_in_use() const { return used_total_; }
  size_t capacity() const;

 private:
  std::vector<Buffer> blocks_;
  size_t used_in_last_ = 0;  // bytes used in blocks_.back()
  size_t used_total_ = 0;
  size_t peak_total_ = 0;
};

}  // namespace headlab
