// Thread policy, in one place. headlab runs `num_threads()` OpenMP threads (default: all cores,
// or OMP_NUM_THREADS). Big GEMMs outside a parallel region use that many BLIS threads; inside an
// OpenMP region (attention over (batch, head)) each thread runs headlab's own per-head kernels
// and any BLIS call would run on one thread, so the two never oversubscribe the cores. Loops split work into static,
// fixed slices so results are bit-identical for a given thread count.
#pragma once

#include <cstdint>

namespace headlab {

int num_threads();
void set_num_threads(int n);
bool in_parallel_region();

// Below this many scalar operations an elementwise loop runs serially: thread start-up costs more.
inline constexpr int64_t kParallelGrain = 1 << 14;

}  // namespace headlab
