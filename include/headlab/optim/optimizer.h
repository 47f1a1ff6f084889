// Optimizers over the flat slabs of a Parameters<T>: AdamW (decoupled weight decay) and SGD with
// momentum (coupled weight decay), both following PyTorch's update rules exactly (see the classes).
// Memory: the optimizer refers to the Parameters (which must outlive it) and owns its state, one
// Buffer per state kind the size of the slab, zeroed at construction; step() never allocates.
// Checkpoints: state_tensors() names views into that state ("optim/m/<param>", ...); write them
// out, and to restore read into the same views and call set_step_count().
//   AdamW<float> opt(params, {.weight_decay = 0.1});  ...backward...;  opt.step(learning_rate(s, step));
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "headlab/nn/parameters.h"
#include "headlab/tensor/arena.h"

namespace headlab {

template <typename T>
class Optimizer {
 public:
  explicit Optimizer(Parameters<T>& params) : params_(params) {}
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual const char* kind() const = 0;  // "adamw", "sgd": stored with checkpoints
  // One update of every parameter from the gradient slab with learning rate `lr` (>= 0).
  virtual void step(double lr) = 0;
  // Named views into the optimizer state, one per (state kind, parameter), in a fixed order.
  virtual std::vector<std::pair<std::string, Tensor<T>>> state_tensors() const = 0;

  // Steps taken so far; AdamW's bias correction uses step_count() after the increment (t = 1, 2...).
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t step_count);
  // Whether parameter i is weight-decayed (weights always; others per the decay_* options).
  bool decays(int i) const { return decays_[i] != 0; }

 protected:
  // Contiguous slab ranges [begin, end) with the same decay flag; padding joins the tensor before it.
  struct Segment {
    int64_t begin, end;
    bool decay;
  };
  // Fills decays_ and segments_; nothing decays when weight_decay == 0.
  void set_decay_flags(double weight_decay, bool decay_biases, bool decay_norms, bool decay_embeddings);
  std::vector<std::pair<std::string, Tensor<T>>> named_views(const std::string& prefix, T* slab) const;

  Parameters<T>& params_;
  int64_t step_count_ = 0;
  std::vector<uint8_t> decays_;    // per parameter
  std::vector<Segment> segments_;  // covers the whole slab
};

// PyTorch defaults except the decay flags. Weights are decayed whenever weight_decay > 0; biases,
// norm gains/shifts and embeddings only when their flag says so (nanoGPT: decay every 2-D tensor).
struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  bool decay_biases = false;
  bool decay_norms = false;
  bool decay_embeddings = true;
};

// AdamW (Loshchilov & Hutter; torch.optim.AdamW), per element, with t = step_count() after ++:
//   p -= lr * wd * p                                  (only if the parameter decays)
//   m  = b1 * m + (1 - b1) * g;   v = b2 * v + (1 - b2) * g^2
//   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Arithmetic is in double per element; m, v and p are rounded to T once when stored.
// State tensors: "optim/m/<param>", then "optim/v/<param>".
template <typename T>
class AdamW final : public Optimizer<T> {
 public:
  AdamW(Parameters<T>& params, const AdamWOptions& options = {});
  const char* kind() const override { return "adamw"; }
  void step(double lr) override;
  std::vector<std::pair<std::string, Tensor<T>>> state_tensors() const override;
  const AdamWOptions& options() const { return options_; }

 private:
  AdamWOptions options_;
  Buffer m_, v_;
};

struct SgdOptions {
  double momentum = 0.0;
  double weight_decay = 0.0;
  bool decay_biases = false;
  bool decay_norms = false;
  bool decay_embeddings = true;
};

// SGD with momentum (torch.optim.SGD, dampening 0, no Nesterov), per element:
//   d   = g + wd * p                 (coupled L2 decay, as PyTorch's SGD; only if the parameter decays)
//   buf = mu * buf + d               (buf starts at zero, so the first step gives buf = d exactly)
//   p  -= lr * buf                   (with momentum 0 there is no buffer and p -= lr * d)
// The gradient slab is not modified. State tensors: "optim/momentum/<param>" (none if momentum 0).
template <typename T>
class Sgd final : public Optimizer<T> {
 public:
  Sgd(Parameters<T>& params, const SgdOptions& options = {});
  const char* kind() const override { return "sgd"; }
  void step(double lr) override;
  std::vector<std::pair<std::string, Tensor<T>>> state_tensors() const override;
  const SgdOptions& options() const { return options_; }

 private:
  SgdOptions options_;
  Buffer momentum_;
};

extern template class Optimizer<float>;
extern template class Optimizer<double>;
extern template class AdamW<float>;
extern template class AdamW<double>;
extern template class Sgd<float>;
extern template class Sgd<double>;

}  // namespace headlab
