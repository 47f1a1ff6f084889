#include "prompt.h"

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/data/task_registry.h"

namespace headlab::cli {

std::optional<std::string> prompt_option(const cxxopts::ParseResult& args) {
  if (!args.count("prompt") && !args.count("prompt-file")) return std::nullopt;
  HEADLAB_CHECK(args.count("prompt") + args.count("prompt-file") == 1, "give --prompt or --prompt-file, not both");
  return args.count("prompt") ? args["prompt"].as<std::string>()
                              : read_text_file(args["prompt-file"].as<std::string>(), "prompt file");
}

std::vector<int32_t> prompt_tokens(const Dataset& dataset, const Config& config, const std::string& text) {
  HEADLAB_CHECK(task_named(config.data.task).family == TaskFamily::text && dataset.tokenizer() != nullptr,
                "--prompt: the checkpoint models data.task = " << config.data.task
                                                               << ", not text; a prompt is text for a text model");
  std::vector<int32_t> tokens;
  dataset.tokenizer()->encode(text, tokens);
  HEADLAB_CHECK(!tokens.empty(), "--prompt: the text has no tokens");
  return tokens;
}

}  // namespace headlab::cli
