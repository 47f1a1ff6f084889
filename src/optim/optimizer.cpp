// AdamW and SGD over the parameter slab. Each update is elementwise, so the slab is split into
// static slices across threads (per decay segment, `omp for nowait`) and the result does not
// depend on the thread count. Padding between tensors stays zero: its gradient is zero, so its
// state and value updates are all zero. The AdamW loop vectorises only under -fno-math-errno
// (std::sqrt otherwise keeps a branch to set errno); sqrt is correctly rounded either way.
#include "headlab/optim/optimizer.h"

#include <cmath>
#include <cstring>

#include "headlab/common/parallel.h"

namespace headlab {

namespace {

bool is_finite_non_negative(double x) {
  return std::isfinite(x) && x >= 0;
}

// A zeroed Buffer of `n` elements of T (a zero-sized slab gets an empty Buffer).
template <typename T>
Buffer zeroed_slab(int64_t n) {
  if (n == 0) return Buffer();
  Buffer b(n * sizeof(T));
  std::memset(b.data(), 0, n * sizeof(T));
  return b;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Optimizer: decay flags, segments, state views.

template <typename T>
void Optimizer<T>::set_step_count(int64_t step_count) {
  HEADLAB_CHECK(step_count >= 0, "optimizer: step_count=" << step_count << " must be >= 0");
  step_count_ = step_count;
}

template <typename T>
void Optimizer<T>::set_decay_flags(double weight_decay, bool decay_biases, bool decay_norms, bool decay_embeddings) {
  decays_.clear();
  segments_.clear();
  for (int i = 0; i < params_.size(); ++i) {
    bool decay = false;
    switch (params_.spec(i).kind) {
      case ParamKind::weight:
        decay = true;
        break;
      case ParamKind::bias:
        decay = decay_biases;
        break;
      case ParamKind::norm:
        decay = decay_norms;
        break;
      case ParamKind::embedding:
        decay = decay_embeddings;
        break;
    }
    decay = decay && weight_decay > 0;
    decays_.push_back(decay ? 1 : 0);
    const int64_t begin = params_.offset(i);
    const int64_t end = i + 1 < params_.size() ? params_.offset(i + 1) : params_.slab_size();
    if (begin == end) continue;
    if (!segments_.empty() && segments_.back().decay == decay)
      segments_.back().end = end;
    else
      segments_.push_back({begin, end, decay});
  }
}

template <typename T>
std::vector<std::pair<std::string, Tensor<T>>> Optimizer<T>::named_views(const std::string& prefix, T* slab) const {
  std::vector<std::pair<std::string, Tensor<T>>> views;
  for (int i = 0; i < params_.size(); ++i)
    views.emplace_back(prefix + params_.spec(i).name, Tensor<T>(slab + params_.offset(i), params_.spec(i).shape));
  return views;
}

// ---------------------------------------------------------------------------------------------
// AdamW.

template <typename T>
AdamW<T>::AdamW(Parameters<T>& params, const AdamWOptions& options) : Optimizer<T>(params), options_(options) {
  const AdamWOptions& o = options_;
  HEADLAB_CHECK(o.beta1 >= 0 && o.beta1 < 1, "adamw: beta1=" << o.beta1 << " must be in [0, 1)");
  HEADLAB_CHECK(o.beta2 >= 0 && o.beta2 < 1, "adamw: beta2=" << o.beta2 << " must be in [0, 1)");
  HEADLAB_CHECK(is_finite_non_negative(o.eps), "adamw: eps=" << o.eps << " must be finite and >= 0");
  HEADLAB_CHECK(is_finite_non_negative(o.weight_decay),
                "adamw: weight_decay=" << o.weight_decay << " must be finite and >= 0");
  this->set_decay_flags(o.weight_decay, o.decay_biases, o.decay_norms, o.decay_embeddings);
  m_ = zeroed_slab<T>(params.slab_size());
  v_ = zeroed_slab<T>(params.slab_size());
}

template <typename T>
void AdamW<T>::step(double lr) {
  HEADLAB_CHECK(is_finite_non_negative(lr), "adamw: lr=" << lr << " must be finite and >= 0");
  const int64_t t = ++this->step_count_;
  const double b1 = options_.beta1, b2 = options_.beta2, eps = options_.eps;
  const double step_size = lr / (1.0 - std::pow(b1, static_cast<double>(t)));
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(b2, static_cast<double>(t)));
  const double decay_factor = 1.0 - lr * options_.weight_decay;  // p -= lr*wd*p  <=>  p *= 1 - lr*wd
  T* p = this->params_.values();
  const T* g = this->params_.grads();
  T* m = static_cast<T*>(m_.data());
  T* v = static_cast<T*>(v_.data());
  const std::vector<typename Optimizer<T>::Segment>& segments = this->segments_;
#pragma omp parallel if (this->params_.slab_size() > kParallelGrain)
  for (const auto& seg : segments) {
    const double factor = seg.decay ? decay_factor : 1.0;
#pragma omp for schedule(static) nowait
    for (int64_t i = seg.begin; i < seg.end; ++i) {
      const double gi = g[i];
      m[i] = static_cast<T>(b1 * m[i] + (1.0 - b1) * gi);
      v[i] = static_cast<T>(b2 * v[i] + (1.0 - b2) * gi * gi);
      const double denom = std::sqrt(static_cast<double>(v[i])) / bias_correction2_sqrt + eps;
      p[i] = static_cast<T>(p[i] * factor - step_size * m[i] / denom);
    }
  }
}

template <typename T>
std::vector<std::pair<std::string, Tensor<T>>> AdamW<T>::state_tensors() const {
  auto views = this->named_views("optim/m/", static_cast<T*>(m_.data()));
  auto v_views = this->named_views("optim/v/", static_cast<T*>(v_.data()));
  views.insert(views.end(), v_views.begin(), v_views.end());
  return views;
}

// ---------------------------------------------------------------------------------------------
// SGD with momentum.

template <typename T>
Sgd<T>::Sgd(Parameters<T>& params, const SgdOptions& options) : Optimizer<T>(params), options_(options) {
  const SgdOptions& o = options_;
  HEADLAB_CHECK(o.momentum >= 0 && o.momentum < 1, "sgd: momentum=" << o.momentum << " must be in [0, 1)");
  HEADLAB_CHECK(is_finite_non_negative(o.weight_decay),
                "sgd: weight_decay=" << o.weight_decay << " must be finite and >= 0");
  this->set_decay_flags(o.weight_decay, o.decay_biases, o.decay_norms, o.decay_embeddings);
  if (o.momentum > 0) momentum_ = zeroed_slab<T>(params.slab_size());
}

template <typename T>
void Sgd<T>::step(double lr) {
  HEADLAB_CHECK(is_finite_non_negative(lr), "sgd: lr=" << lr << " must be finite and >= 0");
  ++this->step_count_;
  const double mu = options_.momentum, wd = options_.weight_decay;
  T* p = this->params_.values();
  const T* g = this->params_.grads();
  T* buf = static_cast<T*>(momentum_.data());
  const bool use_momentum = mu > 0;
  const std::vector<typename Optimizer<T>::Segment>& segments = this->segments_;
#pragma omp parallel if (this->params_.slab_size() > kParallelGrain)
  for (const auto& seg : segments) {
    const double seg_wd = seg.decay ? wd : 0.0;
#pragma omp for schedule(static) nowait
    for (int64_t i = seg.begin; i < seg.end; ++i) {
      const double d = g[i] + seg_wd * p[i];
      if (use_momentum) {
        buf[i] = static_cast<T>(mu * buf[i] + d);
        p[i] = static_cast<T>(p[i] - lr * buf[i]);
      } else {
        p[i] = static_cast<T>(p[i] - lr * d);
      }
    }
  }
}

template <typename T>
std::vector<std::pair<std::string, Tensor<T>>> Sgd<T>::state_tensors() const {
  if (options_.momentum == 0) return {};
  return this->named_views("optim/momentum/", static_cast<T*>(momentum_.data()));
}

template class Optimizer<float>;
template class Optimizer<double>;
template class AdamW<float>;
template class AdamW<double>;
template class Sgd<float>;
template class Sgd<double>;

}  // namespace headlab
