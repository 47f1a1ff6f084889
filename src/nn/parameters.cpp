#include "headlab/nn/parameters.h"

#include <cstring>
#include <random>

#include "headlab/common/hash.h"

namespace headlab {

namespace {
constexpr int64_t kSlabAlignment = 64;  // bytes

}  // namespace

template <typename T>
Parameters<T>::Parameters(std::vector<ParamSpec> specs) : specs_(std::move(specs)) {
  const int64_t align = kSlabAlignment / static_cast<int64_t>(sizeof(T));
  for (const ParamSpec& s : specs_) {
    for (const ParamSpec& other : specs_)
      HEADLAB_CHECK(&other == &s || other.name != s.name, "parameters: name '" << s.name << "' declared twice");
    offsets_.push_back(slab_size_);
    slab_size_ += (s.shape.numel() + align - 1) / align * align;
  }
  values_ = Buffer(slab_size_ * sizeof(T));
  grads_ = Buffer(slab_size_ * sizeof(T));
  if (slab_size_) {
    std::memset(values_.data(), 0, slab_size_ * sizeof(T));
    std::memset(grads_.data(), 0, slab_size_ * sizeof(T));
  }
}

template <typename T>
int Parameters<T>::index(const std::string& name) const {
  for (int i = 0; i < size(); ++i)
    if (specs_[i].name == name) return i;
  throw Error("parameters: no parameter named '" + name + "'");
}

template <typename T>
int64_t Parameters<T>::count() const {
  int64_t n = 0;
  for (const ParamSpec& s : specs_) n += s.shape.numel();
  return n;
}

template <typename T>
void Parameters<T>::init(uint64_t seed) {
  for (int i = 0; i < size(); ++i) {
    const ParamSpec& s = specs_[i];
    Tensor<T> v = value(i);
    switch (s.init) {
      case Init::zeros:
        v.fill(T(0));
        break;
      case Init::ones:
        v.fill(T(1));
        break;
      case Init::normal: {
        std::mt19937_64 rng(hash_combine(seed, hash_text(s.name)));
        std::normal_distribution<double> normal(0.0, s.init_std);
        for (int64_t j = 0; j < v.numel(); ++j) v.data()[j] = static_cast<T>(normal(rng));
        break;
      }
    }
  }
}

template <typename T>
void Parameters<T>::zero_grad() {
  if (slab_size_) std::memset(grads_.data(), 0, slab_size_ * sizeof(T));
}

template class Parameters<float>;
template class Parameters<double>;

}  // namespace headlab
