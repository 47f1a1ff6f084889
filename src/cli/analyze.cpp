// headlab analyze CHECKPOINT|RUN [--split val|test|train] [--batches N] [--batch-size B] [--out DIR]
//                            [--dump-example I]... [--no-ablation] [--no-similarity] [--layer-only] [--ig-steps N]
//                            [--ffn]
//                            [--mask HEADS] [--threads N] [--bleu [--beam N] [--lenpen X] [--sentences N]]
//                            [--alignment [--sentences N]]
// headlab analyze CHECKPOINT|RUN --alignment-only [--split S] [--sentences N]
// headlab analyze CHECKPOINT --prompt TEXT | --prompt-file FILE [--mask HEADS] [--out DIR]
// Per-head importance, ablation, attention statistics and similarity over a data split, written
// to the run folder (the parent of the checkpoint's checkpoints/ folder, or --out):
// heads.csv, heads_similarity.csv, heads.h5, and for each --dump-example I the attention maps
// attention_example_I.csv (+ _tokens.csv) and attention_example_I.h5. With a prompt, only every
// head's attention on it: attention_example_prompt.csv (+ _tokens.csv, .h5). An encoder_decoder's
// heads of all three kinds (enc, dec, cross) are scored alike, named as heads.csv labels them; its
// dumps hold the encoder's and cross maps too, and a Bible verse's gold alignment. --bleu adds the
// translation's BLEU ablation (analysis/bleu_ablation.h): heads.csv's BLEU columns, and
// bleu_ablation.csv and bleu_ablation.h5 with every head's per-sentence statistics; --alignment
// scores the cross heads as word aligners (analysis/alignment_heads.h): heads.csv's alignment
// columns and alignment.csv (--alignment-only: alignment.csv alone, without the head analysis).
// --ffn scores every FFN hidden unit too (analysis/ffn_units.h): units.csv. docs/analysis.md.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/analysis/alignment_heads.h"
#include "headlab/analysis/attention_dump.h"
#include "headlab/analysis/bleu_ablation.h"
#include "headlab/analysis/ffn_units.h"
#include "headlab/analysis/head_roles.h"
#include "headlab/analysis/heads.h"
#include "headlab/common/files.h"
#include "headlab/common/parallel.h"
#include "headlab/data/tasks.h"
#include "headlab/data/text.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/head_list.h"
#include "headlab/nn/prune.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"
#include "options.h"
#include "prompt.h"
#include "verbs.h"

namespace headlab::cli {

namespace fs = std::filesystem;

namespace {

// The alignment table: one line per head, layer mean and baseline (alignment.csv has the counts).
void print_alignment(const AlignmentReport& r, const std::string& split) {
  std::printf("alignment against the Strong's gold, %s split: %lld verses scored, %lld skipped (cut to the caps)\n",
              split.c_str(), static_cast<long long>(r.sentences), static_cast<long long>(r.skipped));
  std::printf("%-16s %9s %9s %9s\n", "method", "precision", "recall", "AER");
  for (const AlignmentRow& row : r.rows)
    std::printf("%-16s %9.4f %9.4f %9.4f%s\n", row.method.c_str(), row.counts.precision(), row.counts.recall(),
                row.counts.aer(), row.alignment_head ? "  alignment head (below both baselines)" : "");
}

// One right-aligned column of the summary table: printf `format`, or "-" for NaN, in `width`.
std::string cell(double v, const char* format, int width) {
  char text[32], out[48];
  if (std::isnan(v))
    std::snprintf(text, sizeof text, "-");
  else
    std::snprintf(text, sizeof text, format, v);
  std::snprintf(out, sizeof out, "%*s", width, text);
  return out;
}

void print_summary(const HeadScores& s) {
  bool gold = false, rare = false, bleu = false, aligned = false;
  for (double v : s.syntactic_head_agreement) gold = gold || !std::isnan(v);
  for (double v : s.rare_token_agreement) rare = rare || !std::isnan(v);
  for (double v : s.ablation_bleu_delta) bleu = bleu || !std::isnan(v);
  for (double v : s.alignment_aer) aligned = aligned || !std::isnan(v);
  std::printf(
      "      head  gate importance (norm)  ablation_dloss  entropy  distance  confidence  prev_token"
      "  offset (share)%s%s%s%s  role\n",
      gold ? "  syntactic_head  dependent  antecedent" : "", rare ? "  rare_token" : "",
      bleu ? "  ablation_dBLEU (p)" : "", aligned ? "  alignment_AER" : "");
  for (int64_t k = 0; k < s.n_total(); ++k) {
    char label[32];
    std::snprintf(label, sizeof label, "%10s", head_label(s, k).c_str());
    std::string line = label + cell(s.gate[k], "%.3g", 6) + cell(s.importance[k], "%.3g", 11) +
                       cell(s.importance_normalized[k], "%.2f", 7) + cell(s.ablation_loss_delta[k], "%+.4f", 16) +
                       cell(s.entropy[k], "%.3f", 9) + cell(s.distance[k], "%.2f", 10) +
                       cell(s.confidence[k], "%.3f", 12) + cell(s.previous_token_agreement[k], "%.3f", 12) +
                       cell(s.positional_offset[k], "%+.0f", 8) + cell(s.positional_share[k], "(%.3f)", 8);
    if (gold)
      line += cell(s.syntactic_head_agreement[k], "%.3f", 16) + cell(s.dependent_agreement[k], "%.3f", 11) +
              cell(s.antecedent_agreement[k], "%.3f", 12);
    if (rare) line += cell(s.rare_token_agreement[k], "%.3f", 12);
    if (bleu) line += cell(s.ablation_bleu_delta[k], "%+.2f", 15) + cell(s.ablation_bleu_p[k], "(%.3f)", 8);
    if (aligned) line += cell(s.alignment_aer[k], "%.4f", 15);
    const std::string role = k < static_cast<int64_t>(s.role.size()) ? role_name(s.role[k]) : "";
    std::printf("%s  %s\n", line.c_str(), role.empty() ? "-" : role.c_str());
  }
  for (const BaselineField& f : positional_baselines()) {
    const PositionalBaseline& b = s.*f.baseline;
    if (!std::isnan(b.agreement))
      std::printf(
          "positional baseline of %s_agreement (%s heads): %.3f (rows whose key is at offset %+.0f), chance %.3f\n",
          f.relation, attention_kind_name(s.baseline_kind), b.agreement, b.offset, b.chance);
  }
}

}  // namespace

int run_analyze(int argc, char** argv) {
  cxxopts::Options options("headlab analyze",
                           "Per-head importance, ablation, attention statistics and similarity of a checkpoint.");
  options.positional_help("CHECKPOINT.h5 | RUN");
  options.add_options()("checkpoint", "checkpoint file (.h5), or a run folder (its best.h5, else its newest)",
                        cxxopts::value<std::string>())("split", "val, test or train",
                                                       cxxopts::value<std::string>()->default_value("val"))(
      "batches", "batches to analyze (default: the whole split, or train.eval_batches for generated tasks)",
      cxxopts::value<int64_t>())("batch-size", "rows per batch (default: train.batch_size)", cxxopts::value<int64_t>())(
      "out", "folder for the files (default: the checkpoint's run folder)", cxxopts::value<std::string>())(
      "dump-example", "also write every head's attention on example I of the split (repeatable)",
      cxxopts::value<std::vector<int64_t>>())("no-ablation", "skip the per-head ablation")(
      "no-similarity", "skip the head-by-head JS distance matrix")(
      "layer-only", "also each head alone in its layer (the others masked): L x H more forwards per batch")(
      "importance-by-rows", "one backward per example for the importance (the check of the fast path)")(
      "ig-steps",
      "also each head's integrated gradients along the gates' path from 0 (Sundararajan et al.), a midpoint sum "
      "over N points (one forward and backward per batch and point): heads.csv's integrated_gradients",
      cxxopts::value<int64_t>())(
      "ffn",
      "also every FFN hidden unit's importance (mean |dL/dgate| over batches), magnitude (|gate| ||W_fc row|| "
      "||W_proj column||) and, with --ig-steps, integrated gradients over the FFN gates: units.csv")(
      "alignment",
      "also score every cross-attention head as a word aligner against the Strong's gold alignment of the split "
      "(translation on the Bible; beside the diagonal and IBM Model 1): heads.csv's alignment_aer, "
      "alignment_precision and alignment_recall, and alignment.csv")(
      "alignment-only", "--alignment without the head analysis: alignment.csv alone")(
      "bleu",
      "translation: also each head's ablation in BLEU and chrF (and with --layer-only each head alone in its "
      "site), decoded with --beam (default 5, as Michel et al.), with a paired bootstrap over sentences: heads.csv's "
      "BLEU columns, bleu_ablation.csv and bleu_ablation.h5")(
      "sentences", "--alignment(-only), --bleu: the split's first N sentences (default all)",
      cxxopts::value<int64_t>())(
      "mask",
      "switch these heads off (gate 0) first, named as heads.csv's label column does: L1H0,... (or LAYER:HEAD,...), "
      "in a translation model KIND.L<layer>H<head>,... (enc.L0H3,cross.L1H2)",
      cxxopts::value<std::string>())(
      "prompt",
      "only every head's attention on this text (text models; a translation model: a source "
      "sentence and its greedy translation)",
      cxxopts::value<std::string>())("prompt-file", "the same with the text of a file", cxxopts::value<std::string>())(
      "set",
      "change a data.* key or train.threads of the checkpoint's config, e.g. --set data.path=moved.txt (repeatable)",
      cxxopts::value<std::vector<std::string>>())("threads", "worker threads (default: the checkpoint's train.threads)",
                                                  cxxopts::value<int>())("h,help", "show this help");
  add_search_options(options, 5);
  const auto parsed = parse_options(options, {"checkpoint"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  HEADLAB_CHECK(args.count("checkpoint"), "no checkpoint given (usage: headlab analyze CHECKPOINT [--split val])");
  const std::string path = resolve_checkpoint(args["checkpoint"].as<std::string>());
  const std::string split_arg = args["split"].as<std::string>();
  const Split split = parse_split(split_arg, true);
  const std::optional<int64_t> batches = count_option<int64_t>(args, "batches", 1),
                               batch_size = count_option<int64_t>(args, "batch-size", 1);
  const std::optional<int> threads = count_option<int>(args, "threads", 1);
  OpenedCheckpoint opened = open_checkpoint(path, checkpoint_overrides(args, {"data.", "train.threads"}));
  const Config& config = opened.config;
  set_num_threads(threads ? *threads : resolved_threads(config));
  Model<float>& model = *opened.model;
  const RunProgress& progress = opened.progress;
  const std::unique_ptr<Dataset>& dataset = opened.dataset;
  if (args.count("mask"))
    switch_off_heads(model, parse_head_list(args["mask"].as<std::string>(), model.spec(), "--mask"));
  const fs::path out =
      args.count("out") ? fs::path(args["out"].as<std::string>()) : fs::path(checkpoint_run_folder(path));

  if (const std::optional<std::string> text = prompt_option(args)) {
    const PromptAttention p = prompt_attention(model, *dataset, config, *text);
    const AttentionExample& a = p.attention;
    fs::create_directories(out);
    write_attention_dump(out.string(), "prompt", a, *dataset, -1, path, "prompt");
    if (a.row.source_len > 0) {
      std::printf("greedy translation: %s\n", p.translation.c_str());
      std::printf("wrote %s/%s.csv (+ _tokens.csv, _encoder.csv, _cross.csv, _source_tokens.csv, .h5): %s, %s\n",
                  out.string().c_str(), attention_dump_stem("prompt").c_str(),
                  (counted(a.row.source_len, "source token") + ", " + counted(a.seq_len, "target token")).c_str(),
                  counted(a.n_layers, "decoder layer").c_str());
    } else {
      std::printf("wrote %s/%s.csv (+ _tokens.csv, .h5): %s, %s\n", out.string().c_str(),
                  attention_dump_stem("prompt").c_str(), counted(a.seq_len, "token").c_str(),
                  counted(a.n_layers, "layer").c_str());
    }
    return 0;
  }

  // Alignment first: its errors (no Strong's numbers, not a translation model) come before the long part.
  std::optional<AlignmentReport> alignment;
  HEADLAB_CHECK(!args.count("alignment-only") || (!args.count("alignment") && !args.count("bleu")),
                "--alignment-only runs no head analysis: give --alignment for both, or leave out --bleu");
  if (args.count("alignment") || args.count("alignment-only")) {
    const char* flag = args.count("alignment-only") ? "--alignment-only" : "--alignment";
    HEADLAB_CHECK(dataset->translation() != nullptr,
                  flag << ": " << path << " models data.task = " << config.data.task
                       << "; alignment heads are a translation model's cross-attention heads");
    AlignmentOptions ao;
    ao.max_sentences = count_option<int64_t>(args, "sentences", 1).value_or(0);
    alignment = score_alignment_heads(model, *dataset->translation(), split, ao);
    print_alignment(*alignment, split_arg);
    fs::create_directories(out);
    if (args.count("alignment-only")) {
      write_alignment_csv((out / "alignment.csv").string(), *alignment);
      std::printf("wrote %s\n", (out / "alignment.csv").string().c_str());
      return 0;
    }
  }

  AnalysisOptions o;
  o.batch_size = batch_size ? *batch_size : config.train.batch_size;
  o.ablation = !args.count("no-ablation");
  o.similarity = !args.count("no-similarity");
  o.layer_only = args.count("layer-only") > 0;
  o.importance_by_rows = args.count("importance-by-rows") > 0;
  o.ig_steps = count_option<int64_t>(args, "ig-steps", 1).value_or(0);
  o.pad_token = dataset->unkeyed_pad_token();
  const int64_t n = batches ? *batches : default_eval_batches(config, *dataset, split, o.batch_size);
  const std::vector<int64_t> dump =
      args.count("dump-example") ? args["dump-example"].as<std::vector<int64_t>>() : std::vector<int64_t>{};
  for (int64_t example : dump) {  // before the long part
    try {
      dataset->example_position(split, example, o.batch_size);
    } catch (const Error& e) {
      throw Error(concat("--dump-example ", example, ": ", e.what()));
    }
  }
  fs::create_directories(out);

  HeadScores s = analyze_heads(model, *dataset, split, n, o);
  for (const char* option : {"beam", "lenpen"})
    HEADLAB_CHECK(args.count("bleu") || !args.count(option), "--" << option << " applies to --bleu only");
  if (args.count("bleu")) {
    HEADLAB_CHECK(dataset->translation() != nullptr, "--bleu: " << path << " models data.task = " << config.data.task
                                                                << "; BLEU ablation needs a translation model");
    BleuAblationOptions bo;
    bo.search = search_options(args);
    bo.max_sentences = count_option<int64_t>(args, "sentences", 1).value_or(0);
    bo.layer_only = o.layer_only;
    const BleuAblation b = bleu_ablation(model, *dataset->translation(), split, bo);
    add_bleu_columns(b, s);
    write_bleu_ablation_csv((out / "bleu_ablation.csv").string(), b);
    write_bleu_ablation_h5((out / "bleu_ablation.h5").string(), b);
    std::printf("BLEU %.2f, chrF %.2f unmasked (%s, beam %lld): %lld decodings; bleu_ablation.csv, .h5\n",
                b.unmasked.bleu.score, b.unmasked.chrf.score,
                counted(static_cast<int64_t>(b.unmasked.hypotheses.size()), "sentence").c_str(),
                static_cast<long long>(bo.search.beam), static_cast<long long>(b.decodings));
  }
  std::printf("checkpoint %s (step %lld), %s split: %s of %lld, %s, %s, %s\n", path.c_str(),
              static_cast<long long>(progress.step), split_arg.c_str(),
              counted(s.n_batches, "batch", "batches").c_str(), static_cast<long long>(o.batch_size),
              counted(s.n_examples, "example").c_str(), counted(s.n_targets, "target").c_str(),
              counted(s.n_query_rows, "query row").c_str());
  if (s.accuracy >= 0)
    std::printf("loss %.4f, accuracy %.4f\n", s.loss, s.accuracy);
  else
    std::printf("loss %.4f\n", s.loss);
  if (s.ig_steps > 0)
    std::printf(
        "integrated gradients (%lld points): the attributions add up to %.6f, the loss with the heads on "
        "minus every head off, within %.2g\n",
        static_cast<long long>(s.ig_steps), s.ig_loss_change, s.ig_completeness_error);

  if (alignment) {
    add_alignment_columns(*alignment, s);
    write_alignment_csv((out / "alignment.csv").string(), *alignment);
  }
  print_summary(s);

  write_heads_csv((out / "heads.csv").string(), s);
  if (o.similarity) write_similarity_csv((out / "heads_similarity.csv").string(), s);
  HeadsFileInfo info;
  info.checkpoint = path;
  info.split = split_arg;
  info.config_toml = to_toml(config);
  info.step = progress.step;
  info.batch_size = o.batch_size;
  if (args.count("ffn")) {  // before heads.h5, which keeps how the units' attributions add up
    const FfnUnitScores u = ffn_unit_scores(model, *dataset, split, n, o.batch_size, o.ig_steps);
    write_file_atomically((out / "units.csv").string(), units_csv(u));
    std::printf("FFN units: %s in %s, loss %.4f", counted(u.n_units(), "unit").c_str(),
                counted(static_cast<int64_t>(u.block_units.size()), "MLP block").c_str(), u.loss);
    if (!u.integrated_gradients.empty()) {
      info.ffn_ig_steps = o.ig_steps;
      info.ffn_ig_loss_change = u.ig.loss - u.ig.baseline_loss;
      info.ffn_ig_completeness_error = u.ig.completeness_error;
      std::printf("; integrated gradients add up to %.6f within %.2g", info.ffn_ig_loss_change,
                  info.ffn_ig_completeness_error);
    }
    std::printf("\nwrote %s/units.csv\n", out.string().c_str());
  }
  write_heads_h5((out / "heads.h5").string(), s, info);
  std::printf("wrote %s/heads.csv%s%s and heads.h5\n", out.string().c_str(),
              o.similarity ? ", heads_similarity.csv" : "", alignment ? ", alignment.csv" : "");

  if (!dump.empty()) {
    for (int64_t example : dump) {
      const std::string name = std::to_string(example);
      const AttentionExample a = attention_example(model, *dataset, split, example, o.batch_size);
      const std::vector<uint8_t> gold = example_gold_alignment(*dataset, split, example, o.batch_size, a.row);
      write_attention_dump(out.string(), name, a, *dataset, o.pad_token, path, split_arg, gold);
      std::printf("wrote %s/%s.csv (+ _tokens.csv, .h5%s%s)\n", out.string().c_str(), attention_dump_stem(name).c_str(),
                  model_kind_info(model.spec().kind).source ? ", _encoder.csv, _cross.csv, _source_tokens.csv" : "",
                  gold.empty() ? "" : ", _gold_alignment.csv");
    }
  }
  return 0;
}

}  // namespace headlab::cli
