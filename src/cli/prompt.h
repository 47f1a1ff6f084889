// --prompt TEXT | --prompt-file FILE, shared by analyze and report: the text, and its tokens for
// a byte-level text model (one line naming what is wrong otherwise).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/io/config.h"

namespace headlab::cli {

// The prompt given on the command line, or nullopt when neither option is; both is an error.
std::optional<std::string> prompt_option(const cxxopts::ParseResult& args);

// The prompt's bytes as tokens, for a checkpoint trained on data.task = text.
std::vector<int32_t> prompt_tokens(const Config& config, const std::string& text);

}  // namespace headlab::cli
