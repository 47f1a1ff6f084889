// Reverse-mode autograd on a tape (define-by-run). Each op appends one Node holding its output,
// the ids of its inputs, the tensors its backward reads, and a plain function pointer to that
// backward. Nodes, outputs and gradients all live in the Tape's Arena, and the node list keeps
// its capacity across reset(), so a warmed-up step allocates nothing.
//
// Gradient convention: a backward *accumulates* (+=) into its inputs' gradient buffers, except
// that the first contribution to an op output's or leaf_with_grad's gradient may overwrite it
// (=): an op whose backward writes every element of an input's gradient asks for it with
// input_grad_target, which hands out a buffer nothing has flowed into yet unzeroed, so no zero
// fill (one thread's pass over every gradient) is needed. Ops writing only part of a gradient
// (slices, scatters) use input_grad, which zeroes a new buffer. Leaves made with
// leaf(value, grad) always accumulate into the caller's persistent buffer (parameter
// gradients), which the caller zeroes between optimizer steps.
//
// Memory: once a node's backward has run, its gradient is dead, so backward() recycles that
// buffer for a later input_grad of the same size (the gradients of a transformer come in a few
// sizes). This halves the arena's peak. A caller that wants an intermediate gradient after
// backward() marks the node with retain_grad() first (otherwise it reads as empty); leaves'
// gradients are never recycled.
//
//   Tape<float> tape(arena);
//   Var<float> w = tape.leaf(weight, weight_grad);  Var<float> x = tape.constant(input);
//   Var<float> loss = mean(matmul(x, w));  tape.backward(loss);  ...  tape.reset();
#pragma once

#include <cstdint>
#include <vector>

#include "headlab/tensor/arena.h"

namespace headlab {

template <typename T>
class Tape;

// A handle to a node of a tape: cheap to copy, valid until the tape is reset.
template <typename T>
struct Var {
  Tape<T>* tape = nullptr;
  int32_t id = -1;

  const Tensor<T>& value() const;
  const Tensor<T>& grad() const;  // empty if nothing flowed back (or not yet)
  const Shape& shape() const { return value().shape(); }
  bool requires_grad() const;
  bool defined() const { return tape != nullptr && id >= 0; }  // a default Var means "none"
};

template <typename T>
struct Node;

template <typename T>
using BackwardFn = void (*)(Tape<T>& tape, const Node<T>& node);

inline constexpr int kMaxOpInputs = 5;
inline constexpr int kMaxSaved = 4;

template <typename T>
struct Node {
  Tensor<T> value;
  Tensor<T> grad;
  bool requires_grad = false;
  bool retain_grad = false;  // keep `grad` readable after backward (see Tape::retain_grad)
  BackwardFn<T> backward = nullptr;
  // Which op made this node, named by its backward function: record() sets it even when it
  // records no backward (grad off), so an op can recognise its outputs (attention_probs). Null
  // for leaves and constants.
  BackwardFn<T> op = nullptr;
  int n_inputs = 0;
  int32_t inputs[kMaxOpInputs] = {};
  Tensor<T> saved[kMaxSaved];     // what the backward reads, besides the inputs' values
  double scalars[4] = {};         // op parameters (scale, eps, probability, ...)
  int64_t ints[4] = {};           // op parameters (dims, flags, seeds, ...)
  const void* context = nullptr;  // op-specific data that outlives the step (token ids, options)
};

template <typename T>
class Tape {
 public:
  explicit Tape(Arena& arena);

  Arena& arena() { return *arena_; }

  // A parameter: its gradient accumulates into `grad` (persistent, zeroed by the caller).
  Var<T> leaf(const Tensor<T>& value, const Tensor<T>& grad);
  // An input that needs a gradient, kept in the arena (for gradient checks of inputs).
  Var<T> leaf_with_grad(const Tensor<T>& value);
  // Data: no gradient.
  Var<T> constant(const Tensor<T>& value);

  // For ops: appends a node whose output is `value`. It requires a gradient if grad mode is on
  // and any input does; otherwise nothing is recorded for the backward.
  Node<T>& record(const Tensor<T>& value, BackwardFn<T> backward, std::initializer_list<Var<T>> inputs);
  Var<T> last() { return Var<T>{this, static_cast<int32_t>(nodes_.size() - 1)}; }

  Node<T>& node(int32_t id) { return nodes_[id]; }
  const Node<T>& node(int32_t id) const { return nodes_[id]; }
  // The gradient buffer of input `i` of `node`, zeroed on first use; an empty tensor if that
  // input needs no gradient. Ops' backwards call this and accumulate into the result.
  Tensor<T> input_grad(const Node<T>& node, int i);

  // For a backward that writes every element of input `i`'s gradient: if nothing has flowed into
  // it yet, `grad` is a new or recycled buffer left unzeroed (garbage) and `overwrite` is true:
  // the op must then assign (=) every element, and finish writing before it asks for another
  // input's gradient (the same node may be two inputs). Otherwise (a second contribution, or a
  // parameter leaf) it is input_grad's buffer with `overwrite` false: accumulate (+=).
  struct GradTarget {
    Tensor<T> grad;  // empty if that input needs no gradient
    bool overwrite = false;
  };
  GradTarget input_grad_target(const Node<T>& node, int i);

  // Keeps v's gradient readable after backward() (intermediate gradients are recycled).
  void retain_grad(Var<T> v);

  // Seeds d(loss)/d(loss) = 1 (loss must have one element) and runs the backward functions in
  // reverse order.
  void backward(Var<T> loss);
  // Forgets all nodes and recycles the arena. Vars from before are invalid afterwards.
  void reset();

  // Memory for values an op computes, uses and drops within one forward or backward call (a
  // recomputed activation, a workspace): `count` elements, valid until the next scratch() call.
  // One buffer for the whole tape, grown when a call needs more: no allocation once warmed up.
  T* scratch(int64_t count);

  bool grad_enabled() const { return grad_enabled_; }
  void set_grad_enabled(bool on) { grad_enabled_ = on; }
  size_t size() const { return nodes_.size(); }

 private:
  // Dead gradient buffers of one byte size, as an intrusive list: the first bytes of a free
  // buffer hold the next one. At most kMaxGradSizes sizes, so recycling never allocates.
  struct FreeGrads {
    size_t bytes;
    void* head;
  };
  static constexpr size_t kMaxGradSizes = 64;
  void* take_free_grad(size_t bytes);
  // A gradient buffer for `shape`, recycled or from the arena, contents undefined.
  Tensor<T> uninitialized_grad(const Shape& shape);
  void recycle_grad(Node<T>& node);

  Arena* arena_;
  std::vector<Node<T>> nodes_;
  std::vector<FreeGrads> free_grads_;
  Buffer scratch_;
  bool grad_enabled_ = true;
};

// Scoped eval mode: ops record no backward inside it.
template <typename T>
class NoGradGuard {
 public:
  explicit NoGradGuard(Tape<T>& tape) : tape_(tape), previous_(tape.grad_enabled()) { tape.set_grad_enabled(false); }
  ~NoGradGuard() { tape_.set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  Tape<T>& tape_;
  bool previous_;
};

template <typename T>
const Tensor<T>& Var<T>::value() const {
  return tape->node(id).value;
}
template <typename T>
const Tensor<T>& Var<T>::grad() const {
  return tape->node(id).grad;
}
template <typename T>
bool Var<T>::requires_grad() const {
  return tape->node(id).requires_grad;
}

extern template class Tape<float>;
extern template class Tape<double>;

}  // namespace headlab
