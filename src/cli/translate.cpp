// headlab translate CHECKPOINT|RUN (--text TEXT | --input FILE) [--beam N] [--lenpen X]
// One translation per input line on stdout, in input order: each line is encoded by the
// checkpoint's tokenizer, cut to the source length the model was trained on, and decoded
// greedily or by beam search (decode/translate_split.h, the path eval and training take too).
// An empty input line gives an empty output line, so output lines match input lines.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/common/files.h"
#include "headlab/common/parallel.h"
#include "headlab/data/text.h"
#include "headlab/decode/translate_split.h"
#include "headlab/nn/model_kinds.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"
#include "options.h"
#include "verbs.h"

namespace headlab::cli {

namespace {

// The lines of `text`: a final newline ends the last line rather than starting an empty one, and
// a '\r' before a newline is dropped. A line that is not UTF-8 is one error naming origin:line.
std::vector<std::string> input_lines(const std::string& text, const std::string& origin) {
  std::vector<std::string> lines;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const int64_t bad = first_invalid_utf8(line);
    HEADLAB_CHECK(bad < 0, origin << ":" << lines.size() + 1 << ": not UTF-8 text (byte " << bad + 1
                                  << " of the line); translate reads UTF-8");
    lines.push_back(std::move(line));
    begin = end + 1;
  }
  return lines;
}

// --text's lines, or --input's (a file, or "-" for stdin); exactly one of them must be given.
std::vector<std::string> source_lines(const cxxopts::ParseResult& args) {
  HEADLAB_CHECK(
      args.count("text") + args.count("input") == 1,
      (args.count("text") ? "give --text or --input, not both" : "nothing to translate: give --text or --input"));
  if (args.count("text")) return input_lines(args["text"].as<std::string>(), "--text");
  const std::string path = args["input"].as<std::string>();
  if (path == "-") {
    const std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
    return input_lines(text, "stdin");
  }
  return input_lines(read_text_file(path, "input file"), path);
}

}  // namespace

int run_translate(int argc, char** argv) {
  cxxopts::Options options("headlab translate", "Translate text with an encoder_decoder checkpoint.");
  options.positional_help("CHECKPOINT.h5 | RUN");
  options.add_options()("checkpoint", "checkpoint file (.h5), or a run folder (its best.h5, else its newest)",
                        cxxopts::value<std::string>())("text", "the text to translate, one sentence per line",
                                                       cxxopts::value<std::string>())(
      "input", "a UTF-8 file to translate, one sentence per line ('-': standard input)", cxxopts::value<std::string>())(
      "set", "change train.threads of the checkpoint's config (repeatable)",
      cxxopts::value<std::vector<std::string>>())("h,help", "show this help");
  add_search_options(options);
  const auto parsed = parse_options(options, {"checkpoint"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  HEADLAB_CHECK(args.count("checkpoint"),
                "no checkpoint given (usage: headlab translate CHECKPOINT (--text TEXT | --input FILE))");
  const SearchOptions search = search_options(args);
  const std::string path = resolve_checkpoint(args["checkpoint"].as<std::string>());
  const Config config = checkpoint_config(path, checkpoint_overrides(args, {"train.threads"}));
  HEADLAB_CHECK(model_kind_named(config.model.kind).source,
                path << " is a " << config.model.kind << " model trained on data.task = " << config.data.task
                     << "; translate reads encoder_decoder checkpoints (data.task = translate)");
  const std::vector<std::string> lines = source_lines(args);  // bad input fails before the model loads
  set_num_threads(resolved_threads(config));
  Model<float> model(model_spec(config));
  load_training_checkpoint(path, model, nullptr);
  const std::shared_ptr<const Tokenizer> tokenizer = checkpoint_tokenizer(path, config);
  const int64_t max_source = translation_options(config).max_source_tokens();
  for (const std::string& hypothesis : translate_lines(model, *tokenizer, lines, max_source, search)) {
    std::fwrite(hypothesis.data(), 1, hypothesis.size(), stdout);
    std::fputc('\n', stdout);
  }
  HEADLAB_CHECK(std::fflush(stdout) == 0, "cannot write the translations to stdout");
  return 0;
}

}  // namespace headlab::cli
