#include "headlab/nn/model_kinds.h"

#include "headlab/common/error.h"

namespace headlab {

const std::vector<ModelKindInfo>& model_kinds() {
  static const std::vector<ModelKindInfo> kinds = {
      {ModelKind::decoder, "decoder", true, true, false, "causal LM: next-token loss at every position"},
      {ModelKind::encoder, "encoder", false, false, false, "bidirectional encoder with a classification head"},
      {ModelKind::encoder_decoder, "encoder_decoder", true, true, true,
       "translation: a bidirectional encoder over the source, a causal decoder with cross-attention to it"},
  };
  return kinds;
}

const ModelKindInfo& model_kind_info(ModelKind kind) {
  for (const ModelKindInfo& k : model_kinds())
    if (k.kind == kind) return k;
  throw Error("model kind " + std::to_string(static_cast<int>(kind)) + " has no row in model_kinds()");
}

const ModelKindInfo& model_kind_named(const std::string& name) {
  for (const ModelKindInfo& k : model_kinds())
    if (name == k.name) return k;
  throw Error("unknown model kind '" + name + "' (one of " + model_kind_choices() + ")");
}

const char* model_kind_choices() {
  static const std::string choices = [] {
    std::string s;
    for (const ModelKindInfo& k : model_kinds()) {
      if (!s.empty()) s += '|';
      s += k.name;
    }
    return s;
  }();
  return choices.c_str();
}

}  // namespace headlab
