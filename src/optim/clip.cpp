// Deterministic global gradient norm. The slab is cut into at most kMaxBlocks blocks of
// block_size elements (a function of the slab size only, never of the thread count). Each block
// is summed by one thread, in double, into eight lanes (element j of the block goes to lane
// j % 8, then the lanes are added in a fixed tree), and the block partials are added in block
// order by one thread. Same slab, same bits, for any number of threads.
#include "headlab/optim/clip.h"

#include <algorithm>
#include <cmath>

#include "headlab/common/parallel.h"

namespace headlab {

namespace {

constexpr int64_t kMaxBlocks = 1024;
constexpr int64_t kMinBlockSize = 4096;
constexpr int kLanes = 8;

template <typename T>
double sum_of_squares(const T* x, int64_t n) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += static_cast<double>(x[i + j]) * static_cast<double>(x[i + j]);
  for (int j = 0; i < n; ++i, ++j) lane[j] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

}  // namespace

template <typename T>
double grad_norm(const Parameters<T>& params) {
  const int64_t n = params.slab_size();
  const T* g = params.grads();
  const int64_t block_size = std::max(kMinBlockSize, (n + kMaxBlocks - 1) / kMaxBlocks);
  const int64_t blocks = (n + block_size - 1) / block_size;
  double partials[kMaxBlocks];
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * block_size;
    partials[b] = sum_of_squares(g + begin, std::min(n, begin + block_size) - begin);
  }
  double total = 0;
  for (int64_t b = 0; b < blocks; ++b) total += partials[b];
  return std::sqrt(total);
}

template <typename T>
double clip_grad_norm(Parameters<T>& params, double max_norm) {
  HEADLAB_CHECK(!std::isnan(max_norm), "clip_grad_norm: max_norm is NaN");
  const double norm = grad_norm(params);
  if (max_norm <= 0 || !std::isfinite(norm) || norm <= max_norm) return norm;
  const T scale = static_cast<T>(max_norm / (norm + 1e-6));
  const int64_t n = params.slab_size();
  T* g = params.grads();
#pragma omp parallel for schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) g[i] *= scale;
  return norm;
}

template double grad_norm(const Parameters<float>&);
template double grad_norm(const Parameters<double>&);
template double clip_grad_norm(Parameters<float>&, double);
template double clip_grad_norm(Parameters<double>&, double);

}  // namespace headlab
