#include "support/trained_run.h"

#include "headlab/train/trainer.h"

namespace headlab::test {

TrainedRun::TrainedRun(const std::string& prefix, const Config& config) : scratch(prefix), run(scratch.dir / "run") {
  RunOptions o;
  o.out_dir = run.string();
  o.quiet = true;
  run_training(config, o);
}

}  // namespace headlab::test
