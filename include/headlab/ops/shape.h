// Shape ops on the tape: views where the memory allows it, copies where downstream kernels need
// contiguous data. Dims count from 0 (no negative dims).
//   reshape(x, shape)           contiguous x -> zero-copy view with the same numel.
//   transpose(x, d0, d1)        -> a contiguous copy with dims d0 and d1 swapped (layer_norm,
//                                  linear, add, ... need contiguous rows, so a stride view would
//                                  only move the copy into every consumer).
//   slice(x, dim, start, len)   -> zero-copy strided view x[..., start:start+len, ...]; how q, k and
//                                  v are cut from a fused qkv projection [B, T, 3C].
//   concat({a, b, ...}, dim)    -> a contiguous copy joined along dim (at most kMaxOpInputs inputs).
// Nothing is saved: every backward routes dy (contiguous) back into the matching region of dx.
//   Var<float> q = slice(qkv, 2, 0, C), k = slice(qkv, 2, C, C), v = slice(qkv, 2, 2 * C, C);
#pragma once

#include <initializer_list>

#include "headlab/autograd/tape.h"

namespace headlab {

template <typename T>
Var<T> reshape(Var<T> x, const Shape& shape);
template <typename T>
Var<T> transpose(Var<T> x, int dim0, int dim1);
template <typename T>
Var<T> slice(Var<T> x, int dim, int64_t start, int64_t length);
template <typename T>
Var<T> concat(std::initializer_list<Var<T>> inputs, int dim);

}  // namespace headlab
