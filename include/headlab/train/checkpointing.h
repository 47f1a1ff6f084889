// What a training checkpoint holds, on top of the generic HDF5 container (io/checkpoint.h):
//   model/<param name>         float32, every parameter, e.g. model/blocks/0/attn/qkv/weight
//   model/<gate name>          float32 [n_heads], head gates, e.g. model/blocks/0/attn/gates
//   optim/<state>/<param name> float32, optimizer state (AdamW m and v, or SGD momentum)
//   tokenizer/model            uint8, the text tokenizer's serialized model (Tokenizer::serialized)
//   attributes: tokenizer (its kind: bytes | sentencepiece; with tokenizer/model, only when the
//               dataset has a tokenizer), config (resolved TOML), step, optimizer, optimizer_steps, best_val_loss,
//               elapsed_s, log_loss_sum/log_loss_steps/log_tokens (the open metrics window), and
//               rng = "counter" (all randomness is a pure function of the seeds and the step, so
//               the step is the whole RNG and data-position state); and, from the container, the
//               build that wrote it (io/provenance.h).
// docs/checkpoint-format.md describes the file for h5py users.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "headlab/data/batch.h"
#include "headlab/data/tokenizer.h"
#include "headlab/io/config.h"
#include "headlab/nn/model.h"
#include "headlab/optim/optimizer.h"

namespace headlab {

struct RunProgress {
  int64_t step = 0;  // optimizer steps completed
  double best_val_loss = 0;
  bool has_best = false;
  double elapsed_s = 0;
  // The metrics row being accumulated (train loss is the mean over the steps since the last row).
  double log_loss_sum = 0;
  int64_t log_loss_steps = 0;
  int64_t tokens_seen = 0;
};

// `tokenizer`: the dataset's (Dataset::tokenizer), nullptr for a generated task.
void save_training_checkpoint(const std::string& path, const Config& config, const Model<float>& model,
                              const Optimizer<float>* optimizer, const RunProgress& progress,
                              const Tokenizer* tokenizer);

// The config a checkpoint was trained with, with `overrides` ("key=value", as --set) applied and
// validated; the verbs decide which keys they let change (cli/options.h, checkpoint_overrides).
// Every loader starts here, so this is where a file is refused, in one line naming it, before any
// model is allocated: another kind of headlab file (heads.h5: "PATH: a heads file (written by
// headlab analyze), not a checkpoint"), or model datasets that are not exactly the names and
// shapes of the model the config describes (the line names the first tensor that differs).
Config checkpoint_config(const std::string& path, const std::vector<std::string>& overrides = {});

// A physically pruned model (nn/prune.h) as an ordinary checkpoint that eval, sample, info,
// analyze and `train --init` load: `config` (the unpruned model's) gets model.layer_heads (one
// entry per attention site) and explicit head widths (d_head; an encoder_decoder's enc_d_head and
// cross_d_head too) from the model's spec; no optimizer state is written (the moments of the
// unpruned shapes mean nothing here; a run started from it with --init begins with zero moments);
// `step` records the step of the model it was pruned from. Throws if config and model disagree
// on anything but the head counts.
void save_pruned_checkpoint(const std::string& path, const Config& config, const Model<float>& model, int64_t step,
                            const Tokenizer* tokenizer);

// The text or translation tokenizer checkpoint `path` stores, for `config` (its checkpoint_config): of kind
// data.tokenizer, with at most model.vocab_size tokens, else one line naming the file. A
// checkpoint written before checkpoints stored tokenizers holds none, and reads as bytes (what
// every text model was then). nullptr for a generated task, whose tokens are not text.
std::shared_ptr<const Tokenizer> checkpoint_tokenizer(const std::string& path, const Config& config);
// `config` with the model section describing `spec`'s head counts (what save_pruned_checkpoint stores).
Config pruned_config(const Config& config, const ModelSpec& spec);

// Loads parameters and gates into `model` (and the optimizer's state when given) from a file of
// kind checkpoint. Every tensor must be present with the model's shape; a mismatch is one line
// naming the tensor and shapes.
RunProgress load_training_checkpoint(const std::string& path, Model<float>& model, Optimizer<float>* optimizer);

// Continues `optimizer` from a checkpoint's state (moments and step count) when the checkpoint
// holds state of the same kind and shapes; returns false, leaving `optimizer` untouched, when it
// does not (a physically pruned checkpoint, or one written without state). Fine-tuning from
// fresh moments takes steps of about the learning rate in every coordinate, which first undoes
// a trained model; continued moments do not.
bool continue_optimizer_state(const std::string& path, Optimizer<float>& optimizer);

// A checkpoint opened for evaluation, analysis or pruning: its config (with `overrides` applied,
// "key=value" as --set takes them), the model with its parameters and gates, and its dataset
// (a text dataset with the checkpoint's tokenizer, checkpoint_tokenizer).
struct OpenedCheckpoint {
  Config config;
  std::unique_ptr<Model<float>> model;
  RunProgress progress;
  std::unique_ptr<Dataset> dataset;
};
OpenedCheckpoint open_checkpoint(const std::string& path, const std::vector<std::string>& overrides = {});

// The checkpoint `path` names: a file as it is; for a run folder, its checkpoints/best.h5, else its
// newest checkpoints/step_<N>.h5 (a run stopped before its first evaluation has no best). Throws
// naming the folder when it holds neither.
std::string resolve_checkpoint(const std::string& path);

// The run folder of a checkpoint: RUN for RUN/checkpoints/X.h5, else the checkpoint's own folder.
std::string checkpoint_run_folder(const std::string& path);

}  // namespace headlab
