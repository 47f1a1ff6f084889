// Global gradient-norm clipping over the whole gradient slab (torch.nn.utils.clip_grad_norm_).
// The L2 norm is summed in double over blocks whose boundaries depend only on the slab size,
// and the block partials are added in block order, so any thread count gives the same bits.
// Works in place on the Parameters' gradient slab; allocates nothing.
//   double norm = clip_grad_norm(params, 1.0);  if (!std::isfinite(norm)) stop the run;
#pragma once

#include "headlab/nn/parameters.h"

namespace headlab {

// sqrt(sum of g^2) over every gradient (padding is zero and adds nothing).
template <typename T>
double grad_norm(const Parameters<T>& params);

// Returns the pre-clip norm. If it is finite and > max_norm, multiplies every gradient by
// T(max_norm / (norm + 1e-6)). max_norm <= 0 turns clipping off (the norm is still returned).
// A non-finite norm (inf/NaN gradients) leaves the gradients untouched and is returned as is:
// the caller must check it and stop.
template <typename T>
double clip_grad_norm(Parameters<T>& params, double max_norm);

extern template double grad_norm(const Parameters<float>&);
extern template double grad_norm(const Parameters<double>&);
extern template double clip_grad_norm(Parameters<float>&, double);
extern template double clip_grad_norm(Parameters<double>&, double);

}  // namespace headlab
