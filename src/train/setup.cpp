#include "headlab/dist/dist.h"
#include "headlab/train/setup.h"

#include <algorithm>

#include "headlab/common/parallel.h"
#include "headlab/data/task_registry.h"
#include "headlab/data/tasks.h"
#include "headlab/data/text.h"
#include "headlab/data/translation.h"

namespace headlab {

TranslationOptions translation_options(const Config& config, std::shared_ptr<const Tokenizer> stored_tokenizer) {
  const DataConfig& d = config.data;
  TranslationOptions o;
  o.path = d.path;
  o.target_path = d.target_path;
  o.bible.source_module = d.source_module;
  o.bible.target_module = d.target_module;
  o.bible.val_book = d.val_book;
  o.bible.test_book = d.test_book;
  o.train_fraction = d.train_fraction;
  o.val_fraction = d.val_fraction;
  o.seq_len = d.seq_len;
  o.source_len = d.source_len;
  o.batch_tokens = d.batch_tokens;
  o.seed = static_cast<uint64_t>(d.seed);
  o.tokenizer.kind = d.tokenizer;
  o.tokenizer.model_type = d.tokenizer_model;
  o.tokenizer.vocab_size = d.vocab_size;
  o.stored_tokenizer = std::move(stored_tokenizer);
  return o;
}

std::unique_ptr<Dataset> make_dataset(const Config& config, std::shared_ptr<const Tokenizer> stored_tokenizer) {
  const DataConfig& d = config.data;
  std::unique_ptr<Dataset> dataset;
  const TaskFamily family = task_named(d.task).family;
  if (family == TaskFamily::parallel) {
    dataset = std::make_unique<TranslationDataset>(translation_options(config, std::move(stored_tokenizer)));
  } else if (family == TaskFamily::text) {
    TextOptions o;
    o.path = d.path;
    o.seq_len = d.seq_len;
    o.seed = static_cast<uint64_t>(d.seed);
    o.train_fraction = d.train_fraction;
    o.val_fraction = d.val_fraction;
    o.require_utf8 = d.require_utf8;
    o.tokenizer = d.tokenizer;
    o.tokenizer_model = d.tokenizer_model;
    o.vocab_size = d.vocab_size;
    o.stored_tokenizer = std::move(stored_tokenizer);
    dataset = std::make_unique<TextDataset>(o);
  } else {
    HEADLAB_CHECK(!stored_tokenizer, "data.task " << d.task << " is generated: it takes no stored tokenizer");
    // Generated tasks (data/task_registry.h); validate() has matched them to model.kind.
    TaskOptions o;
    o.task = d.task;
    o.seq_len = d.seq_len;
    o.seed = static_cast<uint64_t>(d.seed);
    o.vocab_size = d.vocab_size > 0 ? d.vocab_size : config.model.vocab_size;
    o.k = d.k;
    o.offsets = d.offsets;
    o.min_len = d.min_len;
    o.max_len = d.max_len;
    o.train_examples = d.train_examples;
    o.n_classes = config.model.n_classes;
    dataset = make_task(o);
  }
  HEADLAB_CHECK(dataset->vocab_size() <= config.model.vocab_size,
                "data.task " << d.task << " uses " << dataset->vocab_size()
                             << " token ids but model.vocab_size = " << config.model.vocab_size);
  return dataset;
}

std::unique_ptr<Optimizer<float>> make_optimizer(const Config& config, Parameters<float>& params) {
  const TrainConfig& t = config.train;
  if (t.optimizer == "sgd") {
    SgdOptions o;
    o.momentum = t.momentum;
    o.weight_decay = t.weight_decay;
    o.decay_biases = t.decay_biases;
    o.decay_norms = t.decay_norms;
    o.decay_embeddings = t.decay_embeddings;
    return std::make_unique<Sgd<float>>(params, o);
  }
  AdamWOptions o;
  o.beta1 = t.beta1;
  o.beta2 = t.beta2;
  o.eps = t.adam_eps;
  o.weight_decay = t.weight_decay;
  o.decay_biases = t.decay_biases;
  o.decay_norms = t.decay_norms;
  o.decay_embeddings = t.decay_embeddings;
  return std::make_unique<AdamW<float>>(params, o);
}

int64_t warmup_steps(const TrainConfig& train) {
  if (train.warmup_steps >= 0) return train.warmup_steps;
  return std::min<int64_t>(100, train.steps / 10);  // a default that fits any run: 100 from 1000 steps on
}

ScheduleOptions schedule_options(const Config& config) {
  ScheduleOptions s;
  s.lr = config.train.lr;
  s.warmup_steps = warmup_steps(config.train);
  s.total_steps = config.train.steps;
  s.decay = parse_lr_decay(config.train.schedule);
  s.min_lr_ratio = config.train.min_lr_ratio;
  return s;
}

int64_t default_eval_batches(const Config& config, const Dataset& dataset, Split split, int64_t batch_size) {
  return dataset.eval_batches(split, batch_size) > 0 ? 0 : config.train.eval_batches;
}

// train.threads = 0: the cores, shared among the ranks mpirun put on this machine.
int resolved_threads(const Config& config) {
  return config.train.threads > 0 ? static_cast<int>(config.train.threads) : dist::cores_per_rank(num_threads());
}

}  // namespace headlab
