#include "headlab/tensor/tensor.h"

#include <sstream>

namespace headlab {

Shape::Shape(std::initializer_list<int64_t> sizes) {
  HEADLAB_CHECK(sizes.size() <= static_cast<size_t>(kMaxRank),
                "Shape: rank " << sizes.size() << " exceeds the maximum " << kMaxRank);
  for (int64_t s : sizes) {
    HEADLAB_CHECK(s >= 0, "Shape: negative size " << s);
    dims[rank++] = s;
  }
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= dims[d];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (rank != other.rank) return false;
  for (int d = 0; d < rank; ++d)
    if (dims[d] != other.dims[d]) return false;
  return true;
}

std::string Shape::str() const {
  std::ostringstream out;
  out << "[";
  for (int d = 0; d < rank; ++d) out << (d ? ", " : "") << dims[d];
  out << "]";
  return out.str();
}

template <typename T>
Tensor<T>::Tensor(T* data, const Shape& shape) : data_(data), shape_(shape) {
  int64_t stride = 1;
  for (int d = shape.rank - 1; d >= 0; --d) {
    strides_[d] = stride;
    stride *= shape.dims[d];
  }
}

template <typename T>
Tensor<T>::Tensor(T* data, const Shape& shape, const int64_t* strides) : data_(data), shape_(shape) {
  for (int d = 0; d < shape.rank; ++d) strides_[d] = strides[d];
}

template <typename T>
bool Tensor<T>::is_contiguous() const {
  int64_t stride = 1;
  for (int d = rank() - 1; d >= 0; --d) {
    if (size(d) != 1 && strides_[d] != stride) return false;
    stride *= size(d);
  }
  return true;
}

template <typename T>
Tensor<T> Tensor<T>::reshape(const Shape& shape) const {
  HEADLAB_CHECK(is_contiguous(), "reshape: tensor of shape " << shape_.str() << " is not contiguous");
  HEADLAB_CHECK(shape.numel() == numel(), "reshape: cannot view " << shape_.str() << " as " << shape.str());
  return Tensor(data_, shape);
}

template <typename T>
Tensor<T> Tensor<T>::select(int dim, int64_t index) const {
  HEADLAB_CHECK(dim >= 0 && dim < rank() && index >= 0 && index < size(dim),
                "select: index " << index << " on dim " << dim << " of " << shape_.str());
  Tensor out;
  out.data_ = data_ + index * strides_[dim];
  for (int d = 0, o = 0; d < rank(); ++d) {
    if (d == dim) continue;
    out.shape_.dims[o] = shape_.dims[d];
    out.strides_[o] = strides_[d];
    ++o;
  }
  out.shape_.rank = rank() - 1;
  return out;
}

template <typename T>
Tensor<T> Tensor<T>::narrow(int dim, int64_t start, int64_t length) const {
  HEADLAB_CHECK(dim >= 0 && dim < rank() && start >= 0 && length >= 0 && start + length <= size(dim),
                "narrow: [" << start << ", " << start + length << ") on dim " << dim << " of " << shape_.str());
  Tensor out = *this;
  out.data_ = data_ + start * strides_[dim];
  out.shape_.dims[dim] = length;
  return out;
}

template <typename T>
Tensor<T> Tensor<T>::transpose(int dim0, int dim1) const {
  HEADLAB_CHECK(dim0 >= 0 && dim0 < rank() && dim1 >= 0 && dim1 < rank(),
                "transpose: dims " << dim0 << ", " << dim1 << " of " << shape_.str());
  Tensor out = *this;
  std::swap(out.shape_.dims[dim0], out.shape_.dims[dim1]);
  std::swap(out.strides_[dim0], out.strides_[dim1]);
  return out;
}

// Visits every element of `shape` in row-major order, calling fn(offset_a, offset_b) with the
// element's offsets under two stride sets.
template <typename Fn>
static void for_each_offset(const Shape& shape, const int64_t* strides_a, const int64_t* strides_b, Fn fn) {
  const int64_t n = shape.numel();
  if (n == 0) return;
  int64_t index[kMaxRank] = {};
  int64_t offset_a = 0, offset_b = 0;
  for (int64_t i = 0; i < n; ++i) {
    fn(offset_a, offset_b);
    for (int d = shape.rank - 1; d >= 0; --d) {
      if (++index[d] < shape.dims[d]) {
        offset_a += strides_a[d];
        offset_b += strides_b[d];
        break;
      }
      offset_a -= (shape.dims[d] - 1) * strides_a[d];
      offset_b -= (shape.dims[d] - 1) * strides_b[d];
      index[d] = 0;
    }
  }
}

template <typename T>
void Tensor<T>::fill(T value) const {
  if (is_contiguous()) {
    for (int64_t i = 0, n = numel(); i < n; ++i) data_[i] = value;
    return;
  }
  for_each_offset(shape_, strides_, strides_, [&](int64_t a, int64_t) { data_[a] = value; });
}

template <typename T>
void Tensor<T>::copy_from(const Tensor& src) const {
  HEADLAB_CHECK(src.shape() == shape_, "copy_from: shape " << src.shape().str() << " into " << shape_.str());
  if (is_contiguous() && src.is_contiguous()) {
    for (int64_t i = 0, n = numel(); i < n; ++i) data_[i] = src.data_[i];
    return;
  }
  for_each_offset(shape_, strides_, src.strides_, [&](int64_t a, int64_t b) { data_[a] = src.data_[b]; });
}

template class Tensor<float>;
template class Tensor<double>;

}  // namespace headlab
