// Paired bootstrap resampling over sentences (Koehn 2004, "Statistical Significance Tests for
// Machine Translation Evaluation"; the test Michel et al. 2019 use for a head's BLEU change):
// draw the test set's sentences with replacement `samples` times, the same draw for both systems,
// and score both on each draw from their summed per-sentence statistics (bleu.h).
//   delta      corpus BLEU of B minus that of A on the whole set
//   p_value    two-sided: min(1, 2 (min(#{d <= 0}, #{d >= 0}) + 1) / (samples + 1)), d a
//              resample's B - A (the +1 counts the observed set, so p is never 0)
//   low, high  the 2.5% and 97.5% quantiles of the resampled deltas (a 95% interval)
//   low99, high99  the 0.5% and 99.5% quantiles (a 99% interval: at Michel et al.'s level of 0.01
//              a head's change is shown small only by an interval of that confidence)
// Deterministic: resample k's sentences come from splitmix64(seed, k, i).
//   PairedBootstrap b = paired_bootstrap_bleu(stats_base, stats_ablated, 1000, 0);
#pragma once

#include <cstdint>
#include <vector>

#include "headlab/data/bleu.h"

namespace headlab {

struct PairedBootstrap {
  double delta = 0, p_value = 1, low = 0, high = 0, low99 = 0, high99 = 0;
  int64_t samples = 0;
};

// Throws headlab::Error unless a and b hold one entry per sentence of the same (non-empty) set
// and samples >= 1.
PairedBootstrap paired_bootstrap_bleu(const std::vector<BleuStats>& a, const std::vector<BleuStats>& b, int64_t samples,
                                      uint64_t seed);

}  // namespace headlab
