#include "prompt.h"

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/data/task_registry.h"
#include "headlab/data/translation.h"
#include "headlab/decode/search.h"
#include "headlab/decode/translate_split.h"
#include "headlab/train/setup.h"

namespace headlab::cli {

std::optional<std::string> prompt_option(const cxxopts::ParseResult& args) {
  if (!args.count("prompt") && !args.count("prompt-file")) return std::nullopt;
  HEADLAB_CHECK(args.count("prompt") + args.count("prompt-file") == 1, "give --prompt or --prompt-file, not both");
  return args.count("prompt") ? args["prompt"].as<std::string>()
                              : read_text_file(args["prompt-file"].as<std::string>(), "prompt file");
}

PromptAttention prompt_attention(Model<float>& model, const Dataset& dataset, const Config& config,
                                 const std::string& text) {
  const TaskFamily family = task_named(config.data.task).family;
  HEADLAB_CHECK((family == TaskFamily::text || dataset.translation() != nullptr) && dataset.tokenizer() != nullptr,
                "--prompt: the checkpoint models data.task = "
                    << config.data.task << ", not text or translation; a prompt is text for a model that reads text");
  const Tokenizer& tokenizer = *dataset.tokenizer();
  PromptAttention p;
  std::vector<int32_t> tokens, source;
  if (dataset.translation() != nullptr) {
    source = source_ids_of(model.spec(), tokenizer, text, translation_options(config).max_source_tokens());
    HEADLAB_CHECK(!source.empty(), "--prompt: the text has no tokens");
    const SpecialIds ids = search_ids(tokenizer);
    source.push_back(ids.eos);
    const std::vector<int32_t> hypothesis = translate(model, {source}, ids, SearchOptions{})[0];  // greedy
    p.translation = hypothesis_text(tokenizer, hypothesis);
    tokens.push_back(ids.bos);
    tokens.insert(tokens.end(), hypothesis.begin(), hypothesis.end());
  } else {
    tokenizer.encode(text, tokens);
    HEADLAB_CHECK(!tokens.empty(), "--prompt: the text has no tokens");
  }
  p.attention = attention_on_tokens(model, tokens, source);
  for (const int32_t t : tokens) p.token_labels.push_back(dataset.token_label(t));
  for (const int32_t t : source) p.source_labels.push_back(dataset.token_label(t));
  return p;
}

}  // namespace headlab::cli
