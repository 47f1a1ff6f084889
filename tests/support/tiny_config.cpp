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

Config tiny_task_config(const std::string& task, int64_t seq_len, int64_t vocab_size) {
  Config c;
  c.model.vocab_size = vocab_size;
  c.model.d_model = 16;
  c.model.n_heads = 2;
  c.model.n_layers = 1;
  c.model.max_seq_len = seq_len;
  c.data.task = task;
  c.data.seq_len = seq_len;
  c.data.vocab_size = vocab_size;
  c.train.batch_size = 16;
  c.train.lr = 1e-2;
  c.train.warmup_steps = 20;
  c.train.eval_every = 0;
  c.train.eval_batches = 2;
  c.train.checkpoint_every = 0;
  c.train.threads = 1;
  return c;
}

Config tiny_translate_config(const std::filesystem::path& source) {
  Config c;
  c.model.kind = "encoder_decoder";
  c.model.vocab_size = 259;  // bytes and <pad> <s> </s>
  c.model.d_model = 32;
  c.model.n_heads = 2;
  c.model.n_layers = 1;
  c.model.n_encoder_layers = 1;
  c.model.max_seq_len = 64;
  c.data.task = "translate";
  c.data.path = source.string();
  c.data.target_path = (source.parent_path() / "target.txt").string();
  c.data.seq_len = 48;
  c.data.batch_tokens = 600;
  c.data.train_fraction = 0.8;
  c.data.val_fraction = 0.1;
  c.train.steps = 20;
  c.train.lr = 3e-3;
  c.train.warmup_steps = 2;
  c.train.eval_every = 10;
  c.train.eval_batches = 2;
  c.train.eval_bleu_sentences = 8;
  c.train.log_every = 5;
  c.train.checkpoint_every = 10;
  c.train.keep_checkpoints = 0;
  c.train.threads = 1;
  return c;
}

Config k_relation_config(int64_t n_layers, int64_t n_heads, const IntList& offsets, int64_t steps) {
  Config c = tiny_task_config("k_relation", 16, 8);
  c.model.n_heads = n_heads;
  c.model.n_layers = n_layers;
  c.data.offsets = offsets;
  c.train.steps = steps;
  return c;
}

}  // namespace headlab::test
