// A training run: the run folder, the loop around train_step, evaluation, metrics.csv,
// checkpoints (every train.checkpoint_every steps, at the end, on Ctrl-C/SIGTERM, and
// checkpoints/best.h5 on each new best validation loss), progress output and exact resume.
//   RunOptions o; o.out_dir = "runs/default"; o.resume = "auto";  run_training(config, o);
//
// Run folder: DIR/config.toml (resolved config, headed by the build's provenance as comments),
// DIR/metrics.csv (header, then one row per logged step), DIR/checkpoints/step_<N>.h5 (the last
// train.keep_checkpoints) + best.h5, and DIR/tokenizer.model for data.tokenizer = sentencepiece
// (every checkpoint holds it too; a resumed or --init run reuses its checkpoint's tokenizer).
// Resume is exact: the rows of metrics.csv after the checkpoint's step are dropped and replayed,
// and every step is a pure function of (parameters, optimizer state, step), so a resumed run ends
// bit-identical to an uninterrupted one at the same thread count (timing columns aside).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "headlab/io/config.h"
#include "headlab/nn/model.h"

namespace headlab {

struct RunOptions {
  std::string out_dir;
  std::string resume;  // "" = fresh run (DIR must not hold one), "auto" = newest checkpoint, or a path
  // A checkpoint to start a new run from (fine-tuning, e.g. a pruned model): its parameters and
  // gates, and its config's model section, which replaces the given one; step 0, fresh metrics.
  // Of the model keys in `set_keys`, model.dropout (no parameter depends on it) applies; any other
  // must agree with the checkpoint, else one error naming the key and both values.
  // The optimizer continues the checkpoint's state (moments and step count) when it holds state of
  // the same optimizer for these shapes, else starts with moments at zero (a physically pruned
  // checkpoint holds none). With `resume` also set, a checkpoint found there takes precedence.
  std::string init_from;
  std::vector<std::string> set_keys;  // the keys the command line --set ("model.n_heads"), for init_from
  bool quiet = false;                 // no progress output (tests)
  // Test hook, called after each completed step with the model; returning false stops the run
  // at once, as a kill would (no checkpoint written).
  std::function<bool(int64_t step, Model<float>& model)> after_step;
};

enum class RunEnd { finished, interrupted };

struct RunResult {
  RunEnd end = RunEnd::finished;
  int64_t step = 0;           // where the run stands
  int64_t total_steps = 0;    // train.steps
  int64_t steps_trained = 0;  // by this call: 0 when it resumed a finished run
  // The last metrics.csv row this call wrote: its train loss, the mean over steps
  // [train_loss_from, train_loss_to]; and the last validation (train.eval_batches batches of val)
  // with its step. Unset when there is none.
  std::optional<double> train_loss;
  int64_t train_loss_from = 0, train_loss_to = 0;
  std::optional<double> val_loss;
  std::optional<double> val_bleu;  // at val_step: greedy, train.eval_bleu_sentences (translation only)
  int64_t val_step = 0;
  std::optional<double> best_val_loss;  // the run's, over every call (checkpoints/best.h5)
  double tokens_per_s = 0;              // over this call's steps
  double elapsed_s = 0;
  // Background batch filling (train.prefetch): batches asked for, how many were already filled,
  // and the time the steps waited for the rest. All zero without prefetching.
  int64_t batches = 0, batches_ready = 0;
  double data_wait_s = 0;
};

// The metrics.csv header (one place: the writer and the tests read it). val_bleu is the corpus
// BLEU of greedy translations of the first train.eval_bleu_sentences val sentences at each
// evaluation of a translation run, empty otherwise. A run folder whose metrics.csv has the header
// from before val_bleu, kMetricsHeaderBeforeBleu, resumes: the file is rewritten with this header
// and an empty val_bleu in its earlier rows.
extern const char* const kMetricsHeader;
extern const char* const kMetricsHeaderBeforeBleu;

RunResult run_training(const Config& config, const RunOptions& options);

// The line `headlab train` closes with: what the run reached, in the numbers metrics.csv holds
// (nothing unknown printed as a number), e.g. "finished at step 1000 of 1000: train loss 2.2190
// (mean of steps 991-1000), val loss 2.1000 (step 1000, 8 batches of val), best 2.0900; 30105
// tokens/s, 61.2 s".
std::string closing_line(const RunResult& result, int64_t eval_batches);

}  // namespace headlab
