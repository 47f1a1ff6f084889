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
#include "support/tiny_config.h"  // k_relation_config

namespace headlab::test {

struct TrainedRun {
  ScratchDir scratch;
  std::filesystem::path run;
  TrainedRun(const std::string& prefix, const Config& config);
  std::string checkpoint() const { return (run / "checkpoints" / "best.h5").string(); }
};

}  // namespace headlab::test
