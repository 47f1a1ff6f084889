// headlab eval CHECKPOINT|RUN [--split val|test] [--batches N] [--mask HEADS] [--json]
//              [--beam N] [--lenpen X] [--sentences N] [--hypotheses FILE]
// The mean loss over the scored targets, accuracy where the task has one, bits per byte for text;
// for a translation model also corpus BLEU and chrF of the split's translations (greedy unless
// --beam; translate_split, the path `headlab translate` and training take), the hypotheses
// optionally written one per line in corpus order. Printed to 4 decimals, or with --json as one
// JSON object at full precision (README.md lists its fields).
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/common/files.h"
#include "headlab/common/parallel.h"
#include "headlab/data/translation_baselines.h"
#include "headlab/decode/translate_split.h"
#include "headlab/io/head_list.h"
#include "headlab/io/json.h"
#include "headlab/nn/prune.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/evaluate.h"
#include "headlab/train/setup.h"
#include "options.h"
#include "verbs.h"

namespace headlab::cli {

namespace {

// --baseline copy|strongs: the first `sentences` of the split translated by a baseline
// (data/translation_baselines.h) instead of the model, scored as the model would be.
SplitTranslation baseline_scores(const std::string& name, const TranslationDataset& data, Split split,
                                 int64_t sentences) {
  HEADLAB_CHECK(name == "copy" || name == "strongs",
                "--baseline must be copy (the source itself) or strongs (Strong's word by word), got '" << name << "'");
  std::vector<TranslationSentence> chosen = data.sentences(split);
  if (sentences > 0 && static_cast<size_t>(sentences) < chosen.size()) chosen.resize(static_cast<size_t>(sentences));
  std::vector<std::string> references;
  for (const TranslationSentence& s : chosen) references.push_back(s.pair.target);
  std::vector<std::string> hypotheses = name == "copy"
                                            ? copy_source_translations(chosen)
                                            : StrongsDictionary(data.sentences(Split::train)).translate(chosen);
  return score_translations(std::move(hypotheses), std::move(references));
}

// The split translated and scored when the checkpoint is a translation model, else nullopt (and
// then --beam, --lenpen, --sentences and --hypotheses are errors: there is nothing to decode).
std::optional<SplitTranslation> translation_scores(const cxxopts::ParseResult& args, Model<float>& model,
                                                   const Dataset& dataset, Split split, const Config& config,
                                                   const std::string& path) {
  const TranslationDataset* data = dataset.translation();
  if (data == nullptr) {
    for (const char* option : {"beam", "lenpen", "sentences", "hypotheses", "baseline"})
      HEADLAB_CHECK(!args.count(option), "--" << option << ": " << path << " models data.task = " << config.data.task
                                              << "; BLEU is for translation models (data.task = translate)");
    return std::nullopt;
  }
  const int64_t sentences = count_option<int64_t>(args, "sentences", 1).value_or(0);
  SplitTranslation t = args.count("baseline")
                           ? baseline_scores(args["baseline"].as<std::string>(), *data, split, sentences)
                           : translate_split(model, *data, split, search_options(args), sentences);
  if (args.count("hypotheses")) {
    std::string text;
    for (const std::string& h : t.hypotheses) text += h + "\n";
    write_file_atomically(args["hypotheses"].as<std::string>(), text);
  }
  return t;
}

std::string decoding_name(const cxxopts::ParseResult& args, const SearchOptions& search) {
  if (args.count("baseline")) return "baseline " + args["baseline"].as<std::string>() + ", no model";
  if (search.beam == 1) return "greedy decoding";
  char buf[96];
  std::snprintf(buf, sizeof buf, "beam %lld, length penalty %g", static_cast<long long>(search.beam),
                search.length_penalty);
  return buf;
}

}  // namespace

int run_eval(int argc, char** argv) {
  cxxopts::Options options("headlab eval", "Evaluate a checkpoint on a data split.");
  options.positional_help("CHECKPOINT.h5 | RUN");
  options.add_options()("checkpoint", "checkpoint file (.h5), or a run folder (its best.h5, else its newest)",
                        cxxopts::value<std::string>())("split", "val or test",
                                                       cxxopts::value<std::string>()->default_value("val"))(
      "batches", "batches to score (default: the whole split, or train.eval_batches for generated tasks)",
      cxxopts::value<int64_t>())(
      "mask",
      "switch these heads off (gate 0) for the evaluation, named as heads.csv's label column does: L1H0,... (or "
      "LAYER:HEAD,...), in a translation model KIND.L<layer>H<head>,... (enc.L0H3,cross.L1H2)",
      cxxopts::value<std::string>())(
      "set",
      "change a data.* key or train.threads of the checkpoint's config, e.g. --set data.path=moved.txt (repeatable)",
      cxxopts::value<std::vector<std::string>>())(
      "json", "print one JSON object (every number at full precision) instead of the lines")(
      "sentences", "translation: translate the split's first N sentences for BLEU and chrF (default: all)",
      cxxopts::value<int64_t>())("hypotheses",
                                 "translation: write the translations to FILE, one line per sentence in corpus order",
                                 cxxopts::value<std::string>())(
      "baseline",
      "translation: score a baseline's translations instead of the model's: copy (the source) or strongs "
      "(Strong's word by word, from the training split's tags)",
      cxxopts::value<std::string>())("h,help", "show this help");
  add_search_options(options);
  const auto parsed = parse_options(options, {"checkpoint"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  HEADLAB_CHECK(args.count("checkpoint"), "no checkpoint given (usage: headlab eval CHECKPOINT [--split val|test])");
  const std::string path = resolve_checkpoint(args["checkpoint"].as<std::string>());
  const std::string split_arg = args["split"].as<std::string>();
  const Split split = parse_split(split_arg, false);
  const std::optional<int64_t> batches = count_option<int64_t>(args, "batches", 1);
  OpenedCheckpoint opened = open_checkpoint(path, checkpoint_overrides(args, {"data.", "train.threads"}));
  const Config& config = opened.config;
  set_num_threads(resolved_threads(config));
  Model<float>& model = *opened.model;
  const RunProgress& progress = opened.progress;
  const std::unique_ptr<Dataset>& dataset = opened.dataset;
  const std::string mask = args.count("mask") ? args["mask"].as<std::string>() : "";
  std::vector<std::string> masked;  // [site, head] pairs (site = layer in a one-stack model), for --json
  if (!mask.empty()) {
    const HeadKeepMask heads = parse_head_list(mask, model.spec(), "--mask");
    switch_off_heads(model, heads);
    for (size_t l = 0; l < heads.size(); ++l)
      for (size_t h = 0; h < heads[l].size(); ++h)
        if (heads[l][h]) masked.push_back(json_list({std::to_string(l), std::to_string(h)}));
  }
  Arena arena;
  Tape<float> tape(arena);
  Batch batch = dataset->make_batch(config.train.batch_size);
  const int64_t requested = batches ? *batches : default_eval_batches(config, *dataset, split, batch.batch_size);
  const int64_t n = dataset->batches_to_score(split, requested, batch.batch_size, "evaluate");  // what evaluate scores
  const EvalStats e = evaluate(model, *dataset, split, n, batch, tape);
  const std::optional<SplitTranslation> t = translation_scores(args, model, *dataset, split, config, path);
  const SearchOptions search = search_options(args);
  if (args.count("json")) {
    JsonObject out;
    out.text("checkpoint", path)
        .integer("step", progress.step)
        .text("dataset", dataset->name())
        .text("split", split_arg)
        .integer("batches", n)
        .integer("batch_size", batch.batch_size)
        .integer("n_targets", e.n_targets)
        .raw("masked_heads", json_list(masked))
        .number("loss", e.loss)
        .raw("accuracy", e.accuracy >= 0 ? json_number(e.accuracy) : "null")
        .raw("bits_per_byte", e.bits_per_byte >= 0 ? json_number(e.bits_per_byte) : "null")
        .raw("bleu", t ? json_number(t->bleu.score) : "null")
        .raw("chrf", t ? json_number(t->chrf.score) : "null")
        .raw("sentences", t ? std::to_string(t->hypotheses.size()) : "null")
        .raw("beam", t ? std::to_string(search.beam) : "null")
        .raw("length_penalty", t ? json_number(search.length_penalty) : "null")
        .raw("baseline", args.count("baseline") ? json_string(args["baseline"].as<std::string>()) : "null");
    std::printf("%s\n", out.str().c_str());
    return 0;
  }
  std::printf("checkpoint %s (step %lld), %s split, %s of %lld, %s\n", path.c_str(),
              static_cast<long long>(progress.step), split_arg.c_str(), counted(n, "batch", "batches").c_str(),
              static_cast<long long>(batch.batch_size), counted(e.n_targets, "target").c_str());
  if (!mask.empty()) std::printf("heads switched off: %s\n", mask.c_str());
  std::printf("loss %.4f\n", e.loss);
  if (e.accuracy >= 0) std::printf("accuracy %.4f\n", e.accuracy);
  if (e.bits_per_byte >= 0) std::printf("bits_per_byte %.4f\n", e.bits_per_byte);
  if (t) {
    std::printf("bleu %.4f (%s, %s; sacreBLEU's defaults: 13a tokenization)\n", t->bleu.score,
                decoding_name(args, search).c_str(),
                counted(static_cast<int64_t>(t->hypotheses.size()), "sentence").c_str());
    std::printf("chrf %.4f\n", t->chrf.score);
    if (args.count("hypotheses"))
      std::printf("hypotheses written to %s\n", args["hypotheses"].as<std::string>().c_str());
  }
  return 0;
}

}  // namespace headlab::cli
