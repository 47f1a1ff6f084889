#include "support/tiny_config.h"

namespace headlab::test {

Config tiny_text_config(const std::filesystem::path& corpus) {
  Config c;
  c.model.d_model = 16;
  c.model.n_heads = 2;
  c.model.n_layers = 1;
  c.model.max_seq_len = 16;
  c.data.path = corpus.string();
  c.data.seq_len = 16;
  c.train.batch_size = 4;
  c.train.steps = 4;
  c.train.warmup_steps = 1;
  c.train.eval_every = 2;
  c.train.eval_batches = 1;
  c.train.log_every = 1;
  c.train.checkpoint_every = 2;
  c.train.keep_checkpoints = 0;
  c.train.threads = 1;
  return c;
}

}  // namespace headlab::test
