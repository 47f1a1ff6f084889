// Learning-rate schedule (formulas in the header).
#include "headlab/optim/schedule.h"

#include <cmath>
#include <numbers>

#include "headlab/common/error.h"

namespace headlab {

LrDecay parse_lr_decay(const std::string& name) {
  if (name == "cosine") return LrDecay::cosine;
  if (name == "linear") return LrDecay::linear;
  if (name == "constant") return LrDecay::constant;
  throw Error("schedule: unknown lr decay '" + name + "' (expected cosine, linear or constant)");
}

double learning_rate(const ScheduleOptions& o, int64_t step) {
  HEADLAB_CHECK(std::isfinite(o.lr) && o.lr >= 0, "schedule: lr=" << o.lr << " must be finite and >= 0");
  HEADLAB_CHECK(o.total_steps >= 1, "schedule: total_steps=" << o.total_steps << " must be >= 1");
  HEADLAB_CHECK(o.warmup_steps >= 0 && o.warmup_steps <= o.total_steps,
                "schedule: warmup_steps=" << o.warmup_steps << " must be in [0, total_steps=" << o.total_steps << "]");
  HEADLAB_CHECK(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1,
                "schedule: min_lr_ratio=" << o.min_lr_ratio << " must be in [0, 1]");
  HEADLAB_CHECK(step >= 0, "schedule: step=" << step << " must be >= 0");

  // (step + 1) / W first, so step W-1 gets exactly lr.
  if (step < o.warmup_steps) return o.lr * (static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps));
  if (o.decay == LrDecay::constant) return o.lr;
  const double min_lr = o.lr * o.min_lr_ratio;
  if (step >= o.total_steps) return min_lr;
  // Mix lr and min_lr with weights summing to one, so progress 0 gives lr and 1 gives min_lr exactly.
  const int64_t span = o.total_steps - 1 - o.warmup_steps;
  const double progress = span <= 0 ? 0.0 : static_cast<double>(step - o.warmup_steps) / static_cast<double>(span);
  const double w = o.decay == LrDecay::linear ? 1.0 - progress : 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return w * o.lr + (1.0 - w) * min_lr;
}

}  // namespace headlab
