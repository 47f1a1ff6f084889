#include "support/trained_run.h"

#include "headlab/train/trainer.h"

namespace headlab::test {

Config k_relation_config(int64_t n_layers, int64_t n_heads, const IntList& offsets, int64_t steps) {
  Config c;
  c.model.vocab_size = 8;
  c.model.d_model = 16;
  c.model.n_heads = n_heads;
  c.model.n_layers = n_layers;
  c.model.max_seq_len = 16;
  c.data.task = "k_relation";
  c.data.seq_len = 16;
  c.data.offsets = offsets;
  c.data.vocab_size = 8;
  c.train.steps = steps;
  c.train.batch_size = 16;
  c.train.lr = 1e-2;
  c.train.warmup_steps = 20;
  c.train.eval_every = 0;
  c.train.eval_batches = 2;
  c.train.checkpoint_every = 0;
  c.train.threads = 1;
  return c;
}

TrainedRun::TrainedRun(const std::string& prefix, const Config& config) : scratch(prefix), run(scratch.dir / "run") {
  RunOptions o;
  o.out_dir = run.string();
  o.quiet = true;
  run_training(config, o);
}

}  // namespace headlab::test
