// A small model trained once in a scratch folder, for tests that need a real checkpoint (head
// analysis, pruning). k_relation data: the target at t depends on the tokens at t - offset.
//   static const TrainedRun run("analysis", k_relation_config(1, 2, {1}, 300));
//   load_training_checkpoint(run.checkpoint(), model, nullptr);
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "headlab/io/config.h"
#include "support/scratch.h"

namespace headlab::test {

// d_model 16, vocab 8, seq_len 16, batch 16, lr 1e-2 (warmup 20), one thread, no evaluation or
// checkpoint during the run (just the final one, best.h5), eval_batches 2.
Config k_relation_config(int64_t n_layers, int64_t n_heads, const IntList& offsets, int64_t steps);

struct TrainedRun {
  ScratchDir scratch;
  std::filesystem::path run;
  TrainedRun(const std::string& prefix, const Config& config);
  std::string checkpoint() const { return (run / "checkpoints" / "best.h5").string(); }
};

}  // namespace headlab::test
