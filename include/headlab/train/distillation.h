// The teacher of knowledge distillation (train/step.h's Distillation): a checkpoint's model
// (train.teacher), or a copy of a model in memory (prune --recover distill: the unpruned model
// teaches its pruned self).
//   std::unique_ptr<Model<float>> t = load_teacher(config.train.teacher, model.spec(), dataset.tokenizer());
#pragma once

#include <memory>
#include <string>

#include "headlab/data/tokenizer.h"
#include "headlab/nn/model.h"

namespace headlab {

// The checkpoint's model; one headlab::Error line when its outputs do not mean the student's:
// another kind of model, vocabulary size, class count, or tokenizer.
std::unique_ptr<Model<float>> load_teacher(const std::string& path, const ModelSpec& student,
                                           const Tokenizer* student_tokenizer);

// A model with the same spec, parameters and gates (head and FFN).
std::unique_ptr<Model<float>> copy_of(const Model<float>& model);

}  // namespace headlab
