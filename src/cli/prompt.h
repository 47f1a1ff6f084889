// --prompt TEXT | --prompt-file FILE, shared by analyze and report: the text, and every head's
// attention on it by the model's tokenizer (one line naming what is wrong otherwise). A text
// model reads the prompt; a translation model (encoder_decoder) reads it as a source sentence and
// its decoder reads <s> and the model's greedy translation, so all three kinds of maps are shown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/analysis/heads.h"
#include "headlab/data/batch.h"
#include "headlab/io/config.h"

namespace headlab::cli {

// The prompt given on the command line, or nullopt when neither option is; both is an error.
std::optional<std::string> prompt_option(const cxxopts::ParseResult& args);

// Every head's attention on the prompt, for a checkpoint trained on data.task = text or
// translate (`config`, its config, names the task otherwise): the example (row.tokens, and
// row.source_tokens for translation) with the tokens' labels.
struct PromptAttention {
  AttentionExample attention;
  std::vector<std::string> token_labels, source_labels;
  std::string translation;  // translation: the decoded text of the target side
};
PromptAttention prompt_attention(Model<float>& model, const Dataset& dataset, const Config& config,
                                 const std::string& text);

}  // namespace headlab::cli
