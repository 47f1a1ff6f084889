#include "headlab/data/bleu_bootstrap.h"

#include <algorithm>
#include <cmath>

#include "headlab/common/error.h"
#include "headlab/common/hash.h"

namespace headlab {

PairedBootstrap paired_bootstrap_bleu(const std::vector<BleuStats>& a, const std::vector<BleuStats>& b, int64_t samples,
                                      uint64_t seed) {
  HEADLAB_CHECK(!a.empty() && a.size() == b.size(), "paired bootstrap: the systems have "
                                                        << a.size() << " and " << b.size()
                                                        << " sentences; they need the same, at least one");
  HEADLAB_CHECK(samples >= 1, "paired bootstrap: samples must be at least 1, got " << samples);
  const size_t n = a.size();
  PairedBootstrap r;
  r.samples = samples;
  r.delta = bleu_from_stats(sum_stats(b)).score - bleu_from_stats(sum_stats(a)).score;
  std::vector<double> deltas;
  std::vector<size_t> draw(n);
  int64_t not_above = 0, not_below = 0;
  for (int64_t k = 0; k < samples; ++k) {
    for (size_t i = 0; i < n; ++i)
      draw[i] = static_cast<size_t>(splitmix64(hash_combine(hash_combine(seed, static_cast<uint64_t>(k)), i)) % n);
    const double d = bleu_from_stats(sum_stats(b, draw)).score - bleu_from_stats(sum_stats(a, draw)).score;
    deltas.push_back(d);
    not_above += d <= 0;
    not_below += d >= 0;
  }
  r.p_value =
      std::min(1.0, 2.0 * static_cast<double>(std::min(not_above, not_below) + 1) / static_cast<double>(samples + 1));
  std::sort(deltas.begin(), deltas.end());
  auto quantile = [&](double q) {  // the nearest rank
    const auto i = static_cast<size_t>(
        std::clamp(std::ceil(q * static_cast<double>(samples)) - 1, 0.0, static_cast<double>(samples - 1)));
    return deltas[i];
  };
  r.low = quantile(0.025);
  r.high = quantile(0.975);
  r.low99 = quantile(0.005);
  r.high99 = quantile(0.995);
  return r;
}

}  // namespace headlab
