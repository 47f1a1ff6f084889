// The model kinds, one row each: the name model.kind takes and what the kind is. Code that
// depends on the kind asks this table (is it causal, does it score every position), so a new
// kind is one row here and its forward in nn/model.cpp, not a string test in every file.
//   if (model_kind_info(spec.kind).causal) ...
//   const ModelKindInfo& k = model_kind_named("encoder");  // throws, naming the choices
#pragma once

#include <string>
#include <vector>

namespace headlab {

enum class ModelKind { decoder, encoder, encoder_decoder };

struct ModelKindInfo {
  ModelKind kind;
  const char* name;  // model.kind
  // Self-attention sees only earlier positions (a decoder), else every real position.
  bool causal;
  // An LM head scores every position (targets [B, T]), else a classifier scores each sequence
  // once (labels [B]).
  bool lm_head;
  // The model reads a source sequence: an encoder over it, and cross-attention from every
  // decoder block to the encoder's output (translation).
  bool source;
  const char* doc;
};

const std::vector<ModelKindInfo>& model_kinds();
const ModelKindInfo& model_kind_info(ModelKind kind);
const ModelKindInfo& model_kind_named(const std::string& name);  // throws headlab::Error
const char* model_kind_choices();                                // "decoder|encoder|..."

}  // namespace headlab
