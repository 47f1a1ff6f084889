// --prompt TEXT | --prompt-file FILE, shared by analyze and report: the text, and its tokens for
// a text model, by the model's tokenizer (one line naming what is wrong otherwise).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/data/batch.h"
#include "headlab/io/config.h"

namespace headlab::cli {

// The prompt given on the command line, or nullopt when neither option is; both is an error.
std::optional<std::string> prompt_option(const cxxopts::ParseResult& args);

// The prompt's tokens by `dataset`'s tokenizer, for a checkpoint trained on data.task = text
// (`config`, its config, names the task otherwise).
std::vector<int32_t> prompt_tokens(const Dataset& dataset, const Config& config, const std::string& text);

}  // namespace headlab::cli
