// From a validated Config to the objects a run needs: the dataset, the optimizer and the
// learning-rate schedule (the model spec: model_spec, in io/config.h, which validation shares).
//   ModelSpec spec = model_spec(config);  auto data = make_dataset(config);
#pragma once

#include <memory>

#include "headlab/data/batch.h"
#include "headlab/data/translation.h"
#include "headlab/io/config.h"
#include "headlab/nn/model.h"
#include "headlab/optim/optimizer.h"
#include "headlab/optim/schedule.h"

namespace headlab {

// The dataset `config` describes. A text or translation dataset's tokenizer is `stored_tokenizer` when given (a
// checkpoint's or run's, checkpoint_tokenizer: never retrained), else made from the config
// (sentencepiece is trained on the train split).
std::unique_ptr<Dataset> make_dataset(const Config& config,
                                      std::shared_ptr<const Tokenizer> stored_tokenizer = nullptr);
// data.task=translate: the data keys as TranslationDataset takes them, with `stored_tokenizer`
// (else data.tokenizer with the specials, trained on the train split; data.vocab_size pieces).
TranslationOptions translation_options(const Config& config,
                                       std::shared_ptr<const Tokenizer> stored_tokenizer = nullptr);
std::unique_ptr<Optimizer<float>> make_optimizer(const Config& config, Parameters<float>& params);
ScheduleOptions schedule_options(const Config& config);
// train.warmup_steps as the schedule takes it: -1 (the default) is a tenth of train.steps, at
// most 100, so a quick run of 20 steps warms up for 2 and a long one for 100.
int64_t warmup_steps(const TrainConfig& train);
// Batches an evaluation scores when the user gives no count: 0 (= the whole split, see
// evaluate()) when the split is finite, else train.eval_batches.
int64_t default_eval_batches(const Config& config, const Dataset& dataset, Split split, int64_t batch_size);
// train.threads, or all cores when 0.
int resolved_threads(const Config& config);

}  // namespace headlab
