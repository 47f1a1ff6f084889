// The one tiny training setup the tests start from, so that "a small run" means the same thing
// everywhere and a new config key needs no edits across test files. Tests change the fields
// they are about; tests that run the binary write it with ScratchDir::write_config.
//   Config c = test::tiny_text_config(s.write_corpus("corpus.txt", 600));
//   c.train.steps = 6;   const fs::path file = s.write_config("tiny.toml", c);
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "headlab/io/config.h"

namespace headlab::test {

// A byte-level decoder on `corpus`: d_model 16, 2 heads, 1 layer, T = 16, batch 4, 4 steps
// (warm-up 1) at the default lr, evaluated (1 batch) and checkpointed every 2 steps, every
// checkpoint kept, a metrics row every step, one thread.
Config tiny_text_config(const std::filesystem::path& corpus);

// A decoder on a generated task (`task` at T = seq_len, `vocab_size` tokens for data and model):
// d_model 16, 2 heads, 1 layer, batch 16, lr 1e-2 (warm-up 20), one thread, no evaluation or
// checkpoint during the run (just the final one, best.h5), eval_batches 2.
Config tiny_task_config(const std::string& task, int64_t seq_len, int64_t vocab_size);

// An encoder_decoder (d_model 32, 2 heads, 1 encoder and 1 decoder layer) on data.task =
// translate over `source` and the target.txt beside it (ScratchDir::write_parallel_corpus), byte
// tokens with specials, seq_len 48, 600-token batches, 80/10/10 split; 20 steps at lr 3e-3,
// evaluated (2 batches, val BLEU of 8 sentences) and checkpointed every 10, one thread.
Config tiny_translate_config(const std::filesystem::path& source);

// tiny_task_config of k_relation at T = 16 over 8 tokens (the target at t depends on the tokens
// at t - offset), with the given depth, heads, offsets and steps: what trained checkpoints use.
Config k_relation_config(int64_t n_layers, int64_t n_heads, const IntList& offsets, int64_t steps);

}  // namespace headlab::test
