// Parameters<T>: every trainable tensor of a model, declared once in a table of ParamSpec
// (name, shape, init, kind) and stored in two slabs, values and gradients, each one Buffer.
// Slab offsets, the optimizer's state, checkpoint dataset names and the tests' gradient lists
// all derive from the table. Each tensor starts on a 64-byte boundary.
//   Parameters<float> p({{"tok_emb/weight", {V, C}, Init::normal, 0.02, ParamKind::embedding}, ...});
//   p.init(seed);  Tensor<float> w = p.value("tok_emb/weight");  p.zero_grad();
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headlab/tensor/arena.h"

namespace headlab {

enum class Init { normal, zeros, ones };
// Which weight-decay exclusion a parameter falls under (train.decay_biases, ...).
enum class ParamKind { weight, bias, norm, embedding };

struct ParamSpec {
  std::string name;  // module path, e.g. "blocks/0/attn/qkv/weight"
  Shape shape;
  Init init = Init::normal;
  double init_std = 0.02;  // for Init::normal
  ParamKind kind = ParamKind::weight;
};

template <typename T>
class Parameters {
 public:
  Parameters() = default;
  explicit Parameters(std::vector<ParamSpec> specs);

  int size() const { return static_cast<int>(specs_.size()); }
  const ParamSpec& spec(int i) const { return specs_[i]; }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  int index(const std::string& name) const;  // throws if absent
  int64_t offset(int i) const { return offsets_[i]; }
  int64_t count() const;  // number of scalars (excluding alignment padding)

  Tensor<T> value(int i) const { return Tensor<T>(values() + offsets_[i], specs_[i].shape); }
  Tensor<T> grad(int i) const { return Tensor<T>(grads() + offsets_[i], specs_[i].shape); }
  Tensor<T> value(const std::string& name) const { return value(index(name)); }
  Tensor<T> grad(const std::string& name) const { return grad(index(name)); }

  // The whole slabs (padding included, padding always zero): for the optimizer and clipping.
  T* values() const { return static_cast<T*>(values_.data()); }
  T* grads() const { return static_cast<T*>(grads_.data()); }
  int64_t slab_size() const { return slab_size_; }

  // Deterministic init: each parameter draws from a generator seeded by (seed, its name), so
  // adding or dropping a parameter (model.bias = false drops every bias) leaves the initial
  // values of all the others unchanged, and runs that differ only there start alike.
  void init(uint64_t seed);
  void zero_grad();

 private:
  std::vector<ParamSpec> specs_;
  std::vector<int64_t> offsets_;
  int64_t slab_size_ = 0;
  Buffer values_, grads_;
};

extern template class Parameters<float>;
extern template class Parameters<double>;

}  // namespace headlab
