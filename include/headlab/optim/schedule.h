// Learning-rate schedule: linear warmup, then cosine / linear decay to min_lr, or constant.
// A pure function of the step, so a resumed run gets exactly the rates it would have had.
// `step` is the 0-based index of the optimizer update about to be taken (0 .. total_steps-1):
//   warmup   step < W:            lr * (step + 1) / W          (step 0 -> lr/W, step W-1 -> lr)
//   decay    W <= step < S:       progress = (step - W) / (S - 1 - W)  (0 when S - 1 - W == 0)
//            cosine:   w = (1 + cos(pi * progress)) / 2,  lr * w + min_lr * (1 - w)
//            linear:   w = 1 - progress,                  lr * w + min_lr * (1 - w)
//            constant: lr
//   after    step >= S:           min_lr (lr for constant)
// with W = warmup_steps, S = total_steps, min_lr = lr * min_lr_ratio; so step W gets exactly lr
// and the last step S-1 exactly min_lr (lr if it is step W too).
//   double lr = learning_rate({.lr = 3e-4, .warmup_steps = 100, .total_steps = 5000}, step);
#pragma once

#include <cstdint>
#include <string>

namespace headlab {

enum class LrDecay { cosine, linear, constant };

LrDecay parse_lr_decay(const std::string& name);  // "cosine", "linear", "constant"; throws otherwise

struct ScheduleOptions {
  double lr = 3e-4;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  LrDecay decay = LrDecay::cosine;
  double min_lr_ratio = 0.1;  // min_lr = lr * min_lr_ratio, in [0, 1]
};

// Throws headlab::Error on bad options (negative lr, warmup_steps > total_steps, ...) or step < 0.
double learning_rate(const ScheduleOptions& options, int64_t step);

}  // namespace headlab
