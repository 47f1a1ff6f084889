// Shape and Tensor<T>: a non-owning, strided view of T (float or double) with up to kMaxRank
// dimensions. Memory belongs to an Arena (per-step activations) or a Buffer (parameters,
// optimizer state); a Tensor never frees. Views such as a head's slice of q [B,T,H,Dh]
// (`q.select(2, h)` -> [B,T,Dh] with row stride H*Dh) cost no copy.
//   Tensor<float> x(ptr, {B, T, C});  auto head = x.reshape({B, T, H, Dh}).select(2, h);
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "headlab/common/error.h"

namespace headlab {

inline constexpr int kMaxRank = 5;

struct Shape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};

  Shape() = default;
  Shape(std::initializer_list<int64_t> sizes);

  int64_t operator[](int d) const { return dims[d]; }
  int64_t numel() const;
  int64_t last() const { return dims[rank - 1]; }
  // Product of all dims but the last: the number of rows when viewed as a matrix.
  int64_t rows() const { return numel() / (rank ? last() : 1); }
  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }
  std::string str() const;  // "[2, 3, 4]"
};

template <typename T>
class Tensor {
 public:
  Tensor() = default;
  Tensor(T* data, const Shape& shape);  // contiguous row-major
  Tensor(T* data, const Shape& shape, const int64_t* strides);

  T* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank; }
  int64_t size(int d) const { return shape_.dims[d]; }
  int64_t stride(int d) const { return strides_[d]; }
  int64_t numel() const { return shape_.numel(); }
  bool empty() const { return data_ == nullptr; }
  bool is_contiguous() const;

  // Element access for tests and small loops (no bounds checks in release builds).
  T& operator()(int64_t i0) const { return data_[i0 * strides_[0]]; }
  T& operator()(int64_t i0, int64_t i1) const { return data_[i0 * strides_[0] + i1 * strides_[1]]; }
  T& operator()(int64_t i0, int64_t i1, int64_t i2) const {
    return data_[i0 * strides_[0] + i1 * strides_[1] + i2 * strides_[2]];
  }
  T& operator()(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
    return data_[i0 * strides_[0] + i1 * strides_[1] + i2 * strides_[2] + i3 * strides_[3]];
  }

  // Views (no copy).
  Tensor reshape(const Shape& shape) const;                     // requires contiguous
  Tensor select(int dim, int64_t index) const;                  // drops `dim`
  Tensor narrow(int dim, int64_t start, int64_t length) const;  // keeps `dim`
  Tensor transpose(int dim0, int dim1) const;                   // swaps strides

  void fill(T value) const;                 // any strides
  void copy_from(const Tensor& src) const;  // same shape, any strides

 private:
  T* data_ = nullptr;
  Shape shape_;
  int64_t strides_[kMaxRank] = {};
};

extern template class Tensor<float>;
extern template class Tensor<double>;

}  // namespace headlab
