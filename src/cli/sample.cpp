// headlab sample CHECKPOINT|RUN [--prompt TEXT] [--tokens N] [--temperature T] [--seed S]
// Text decoders only: the prompt is encoded, and each sampled token decoded and printed, by the
// checkpoint's tokenizer (bytes or sentencepiece). Generation is decode/sample.h's (KV cache).
#include <cmath>
#include <cstdio>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/common/parallel.h"
#include "headlab/data/task_registry.h"
#include "headlab/decode/sample.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"
#include "options.h"
#include "verbs.h"

namespace headlab::cli {

int run_sample(int argc, char** argv) {
  cxxopts::Options options("headlab sample", "Generate text from a text decoder checkpoint.");
  options.positional_help("CHECKPOINT.h5 | RUN");
  // The prompt's default is a newline, which cxxopts would print raw in --help: given in the text.
  options.add_options()("checkpoint", "checkpoint file (.h5), or a run folder (its best.h5, else its newest)",
                        cxxopts::value<std::string>())("prompt", "text to continue (default: \"\\n\", a newline)",
                                                       cxxopts::value<std::string>())(
      "tokens", "tokens to generate (bytes for a byte-level model)", cxxopts::value<int64_t>()->default_value("200"))(
      "temperature", "softmax temperature; 0 = greedy", cxxopts::value<double>()->default_value("0.8"))(
      "seed", "sampling seed", cxxopts::value<uint64_t>()->default_value("0"))(
      "set", "change train.threads of the checkpoint's config (repeatable)",
      cxxopts::value<std::vector<std::string>>())("h,help", "show this help");
  const auto parsed = parse_options(options, {"checkpoint"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  HEADLAB_CHECK(args.count("checkpoint"), "no checkpoint given (usage: headlab sample CHECKPOINT [--prompt TEXT])");
  const std::string path = resolve_checkpoint(args["checkpoint"].as<std::string>());
  const std::string prompt = args.count("prompt") ? args["prompt"].as<std::string>() : "\n";
  const int64_t n_tokens = *count_option<int64_t>(args, "tokens", 0);
  const double temperature = *count_option<double>(args, "temperature", 0);
  HEADLAB_CHECK(std::isfinite(temperature), "--temperature must be finite, got " << temperature);
  HEADLAB_CHECK(!prompt.empty(), "--prompt must not be empty");
  const Config config = checkpoint_config(path, checkpoint_overrides(args, {"train.threads"}));
  // Generated tasks have their own alphabets (k_relation's vocab may be 5): bytes mean nothing there.
  const ModelKindInfo& kind = model_kind_named(config.model.kind);
  HEADLAB_CHECK(kind.lm_head && !kind.source && task_named(config.data.task).family == TaskFamily::text,
                path << " is a model.kind = " << kind.name << " model trained on data.task = " << config.data.task
                     << " (vocab " << config.model.vocab_size << "); sample generates text from text decoders only ("
                     << (kind.source ? "headlab translate reads" : "eval and analyze read") << " this one)");
  set_num_threads(resolved_threads(config));
  Model<float> model(model_spec(config));
  load_training_checkpoint(path, model, nullptr);
  const std::shared_ptr<const Tokenizer> tokenizer = checkpoint_tokenizer(path, config);
  std::vector<int32_t> prompt_ids;
  tokenizer->encode(prompt, prompt_ids);
  HEADLAB_CHECK(!prompt_ids.empty(), "--prompt: the text has no tokens");
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  SampleOptions sampling{.tokens = n_tokens, .temperature = temperature, .seed = args["seed"].as<uint64_t>()};
  // Ids past the tokenizer's (a model.vocab_size above data.vocab_size) are never drawn: no text has them.
  sampling.vocab_limit = tokenizer->vocab_size();
  sample_tokens(model, prompt_ids, sampling, [&](int32_t next) {
    const std::string text = tokenizer->decode(&next, 1);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace headlab::cli
