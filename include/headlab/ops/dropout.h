// Inverted dropout:  y[i] = keep(seed, i) ? x[i] / (1 - p) : 0,  same shape as x (contiguous).
// keep() is a counter-based hash (splitmix64) of the seed and the element's flat index, so the
// mask is reproducible, independent of the thread count, and never stored: the backward
// recomputes it from the seed (node.ints[0]) and p (node.scalars[0]).
// Dropout is active only while the tape records (training). With p == 0, or under a
// NoGradGuard (evaluation), it returns x itself and records nothing. Needs 0 <= p < 1.
// Use a fresh seed for every call site and step (e.g. hash of step, layer, site).
//   Var<float> h = dropout(attn_out, 0.1, step_seed + layer);
#pragma once

#include <cstdint>

#include "headlab/autograd/tape.h"

namespace headlab {

template <typename T>
Var<T> dropout(Var<T> x, double p, uint64_t seed);

}  // namespace headlab
