#include "headlab/autograd/tape.h"

namespace headlab {

template <typename T>
Tape<T>::Tape(Arena& arena) : arena_(&arena) {
  nodes_.reserve(1024);
  free_grads_.reserve(kMaxGradSizes);
}

template <typename T>
Var<T> Tape<T>::leaf(const Tensor<T>& value, const Tensor<T>& grad) {
  HEADLAB_CHECK(grad.empty() || grad.shape() == value.shape(),
                "leaf: gradient shape " << grad.shape().str() << " differs from value shape " << value.shape().str());
  Node<T>& n = nodes_.emplace_back();
  n.value = value;
  n.grad = grad;
  n.requires_grad = !grad.empty() && grad_enabled_;
  return last();
}

template <typename T>
Var<T> Tape<T>::leaf_with_grad(const Tensor<T>& value) {
  Node<T>& n = nodes_.emplace_back();
  n.value = value;
  n.requires_grad = grad_enabled_;
  return last();
}

template <typename T>
Var<T> Tape<T>::constant(const Tensor<T>& value) {
  Node<T>& n = nodes_.emplace_back();
  n.value = value;
  return last();
}

template <typename T>
Node<T>& Tape<T>::record(const Tensor<T>& value, BackwardFn<T> backward, std::initializer_list<Var<T>> inputs) {
  HEADLAB_CHECK(inputs.size() <= static_cast<size_t>(kMaxOpInputs),
                "tape: an op has " << inputs.size() << " inputs, at most " << kMaxOpInputs);
  bool any_requires_grad = false;
  for (const Var<T>& v : inputs) {
    HEADLAB_CHECK(v.tape == this, "tape: an op mixes Vars of different tapes");
    any_requires_grad = any_requires_grad || nodes_[v.id].requires_grad;
  }
  Node<T>& n = nodes_.emplace_back();
  n.value = value;
  n.op = backward;
  n.requires_grad = grad_enabled_ && any_requires_grad;
  if (n.requires_grad) {
    n.backward = backward;
    for (const Var<T>& v : inputs) n.inputs[n.n_inputs++] = v.id;
  }
  return n;
}

template <typename T>
Tensor<T> Tape<T>::uninitialized_grad(const Shape& shape) {
  const size_t bytes = static_cast<size_t>(shape.numel()) * sizeof(T);
  if (void* reused = take_free_grad(bytes)) return Tensor<T>(static_cast<T*>(reused), shape);
  return arena_->template empty<T>(shape);
}

template <typename T>
Tensor<T> Tape<T>::input_grad(const Node<T>& node, int i) {
  Node<T>& input = nodes_[node.inputs[i]];
  if (!input.requires_grad) return {};
  if (input.grad.empty()) {
    input.grad = uninitialized_grad(input.value.shape());
    input.grad.fill(T(0));
  }
  return input.grad;
}

template <typename T>
T* Tape<T>::scratch(int64_t count) {
  const size_t bytes = static_cast<size_t>(count) * sizeof(T);
  if (scratch_.bytes() < bytes) scratch_ = Buffer(bytes);
  return static_cast<T*>(scratch_.data());
}

template <typename T>
typename Tape<T>::GradTarget Tape<T>::input_grad_target(const Node<T>& node, int i) {
  Node<T>& input = nodes_[node.inputs[i]];
  if (!input.requires_grad) return {};
  // A parameter leaf's buffer is never empty here (leaf() requires one to need a gradient), so
  // parameters always accumulate.
  if (!input.grad.empty()) return {input.grad, false};
  input.grad = uninitialized_grad(input.value.shape());
  return {input.grad, true};
}

template <typename T>
void Tape<T>::retain_grad(Var<T> v) {
  HEADLAB_CHECK(v.tape == this, "retain_grad: the Var belongs to another tape");
  nodes_[v.id].retain_grad = true;
}

template <typename T>
void* Tape<T>::take_free_grad(size_t bytes) {
  for (FreeGrads& f : free_grads_)
    if (f.bytes == bytes && f.head != nullptr) {
      void* p = f.head;
      f.head = *static_cast<void**>(p);
      return p;
    }
  return nullptr;
}

template <typename T>
void Tape<T>::recycle_grad(Node<T>& node) {
  // Called for op outputs only (nodes with a backward), whose gradients input_grad made:
  // contiguous; skip any too small to hold the link.
  const size_t bytes = static_cast<size_t>(node.grad.numel()) * sizeof(T);
  if (node.retain_grad || bytes < sizeof(void*) || !node.grad.is_contiguous()) return;
  FreeGrads* list = nullptr;
  for (FreeGrads& f : free_grads_)
    if (f.bytes == bytes) list = &f;
  if (list == nullptr) {
    if (free_grads_.size() == kMaxGradSizes) return;  // rare sizes just stay in the arena
    list = &free_grads_.emplace_back(FreeGrads{bytes, nullptr});
  }
  *static_cast<void**>(static_cast<void*>(node.grad.data())) = list->head;
  list->head = node.grad.data();
  node.grad = Tensor<T>();  // reading it later sees "no gradient", not another node's numbers
}

template <typename T>
void Tape<T>::backward(Var<T> loss) {
  HEADLAB_CHECK(loss.tape == this, "backward: the loss belongs to another tape");
  Node<T>& root = nodes_[loss.id];
  HEADLAB_CHECK(root.value.numel() == 1,
                "backward: the loss must have one element, got shape " << root.value.shape().str());
  HEADLAB_CHECK(root.requires_grad, "backward: the loss does not depend on anything that needs a gradient");
  if (root.grad.empty()) root.grad = arena_->zeros<T>(root.value.shape());
  root.grad.data()[0] += T(1);
  for (int32_t id = loss.id; id >= 0; --id) {
    Node<T>& n = nodes_[id];
    // A node nothing flowed into contributes nothing; leaves have no backward.
    if (n.backward != nullptr && !n.grad.empty()) {
      n.backward(*this, n);
      recycle_grad(n);
    }
  }
}

template <typename T>
void Tape<T>::reset() {
  nodes_.clear();
  free_grads_.clear();  // the buffers go with the arena
  arena_->reset();
}

template class Tape<float>;
template class Tape<double>;

}  // namespace headlab
