// Embedding lookup: out[p, :] = table[ids[p], :] for every position p of ids.
//   embedding(tape, ids, ids_shape [B, T], table [V, C]) -> [B, T, C]  (any ids rank <= 4)
// The ids are not copied: node.context points at the caller's array, which must stay alive and
// unchanged until the backward has run (one step). Nothing else is saved.
// Backward: dtable[ids[p], :] += dout[p, :], deterministic for any thread count.
//   Var<float> tok = embedding(tape, batch.ids, {B, T}, wte);
#pragma once

#include <cstdint>

#include "headlab/autograd/tape.h"

namespace headlab {

template <typename T>
Var<T> embedding(Tape<T>& tape, const int32_t* ids, const Shape& ids_shape, Var<T> table);

}  // namespace headlab
