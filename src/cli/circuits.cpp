// headlab circuits CHECKPOINT|RUN [--detectors [--rows N] [--half N] [--seed S]] [--composition]
//                                [--dla [--split S] [--batches N] [--batch-size B]]
//                                [--patch] [--path-patch] [--prompt TEXT --corrupt TEXT [--target TEXT]
//                                 [--answer A --wrong W]]
//                                [--out DIR] [--threads N]
// How heads cooperate (docs/circuits.md), for a checkpoint or for every checkpoint a run folder
// keeps (along training), into the run folder (or --out):
//   --detectors    every head's previous-token, duplicate-token, induction and prefix-matching
//                  scores on repeated random tokens (analysis/head_detectors.h): detectors.csv, .h5
//   --composition  Q-, K- and V-composition of every pair of heads where one reads what the other
//                  writes (an encoder_decoder's three kinds included), and each head's OV copying
//                  score, from the weights (analysis/composition.h):
//                  composition.csv, ov_copying.csv
//   --dla          direct logit attribution of every head, attention bias and MLP to the correct
//                  token, and the logit lens after each layer, over a split
//                  (analysis/logit_attribution.h): dla.csv, logit_lens.csv. One checkpoint: the
//                  one given, or the run's best (else newest), as analyze takes it.
//   --patch        activation patching of every head's output, queries, keys and values and of the
//                  residual stream at every block and position, clean into corrupted
//                  (analysis/patching.h): patching_heads.csv, patching_resid.csv
//   --path-patch   path patching of every sender head into every later receiver's q, k and v:
//                  path_patching.csv
//                  Inputs: --prompt and --corrupt (a text model; the loss of the clean text's next
//                  tokens, or with --answer/--wrong the logit difference at the last position;
//                  a translation model: two sources and the --target both runs decode), else
//                  generated pairs: repeated random tokens with the first copy resampled (--rows,
//                  --half, --seed); a translation model's val sentences of one length with their
//                  sources swapped (--rows). One checkpoint, as --dla.
#include <algorithm>
#include <cmath>
#include <optional>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/analysis/composition.h"
#include "headlab/analysis/head_detectors.h"
#include "headlab/analysis/logit_attribution.h"
#include "headlab/analysis/patching.h"
#include "headlab/common/timing.h"
#include "headlab/common/parallel.h"
#include "headlab/data/translation.h"
#include "headlab/io/config.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/run_folder.h"
#include "headlab/train/setup.h"
#include "options.h"
#include "verbs.h"

namespace headlab::cli {

namespace fs = std::filesystem;

namespace {

// The checkpoints to score: a file as it is; a run folder's step_<N>.h5 in step order.
std::vector<CheckpointFile> checkpoints_of(const std::string& path) {
  if (!fs::is_directory(path)) return {{-1, path}};
  std::vector<CheckpointFile> files = list_checkpoints(path);
  HEADLAB_CHECK(!files.empty(), path << ": no checkpoints/step_<N>.h5 in this run folder (train with "
                                        "train.checkpoint_every > 0 to keep checkpoints along training)");
  return files;
}

// One line per checkpoint: each detector's top head and its score.
void print_top_heads(int64_t step, const DetectorScores& s) {
  std::printf("step %8lld", static_cast<long long>(step));
  for (int d = 0; d < kHeadDetectors; ++d) {
    const std::vector<double>& v = s.scores[static_cast<size_t>(d)];
    const auto k = static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
    std::printf("  %s %s %.3f", head_detector_name(static_cast<HeadDetector>(d)), s.labels[k].c_str(), v[k]);
  }
  std::printf("\n");
}

// The last checkpoint's strongest pair of each kind.
void print_top_compositions(const CompositionScores& s) {
  for (int k = 0; k < kCompositions; ++k) {
    double best = -1;
    size_t best_a = 0, best_r = 0;
    for (size_t a = 0; a < s.labels.size(); ++a)
      for (size_t r = 0; r < s.labels.size(); ++r) {
        const double v = s.score(static_cast<Composition>(k), a, r);
        if (!std::isnan(v) && v > best) best = v, best_a = a, best_r = r;
      }
    if (best >= 0)
      std::printf("strongest %s-composition: %s -> %s %.3f\n", composition_name(static_cast<Composition>(k)),
                  s.labels[best_a].c_str(), s.labels[best_r].c_str(), best);
  }
}

// The strongest components and the lens, then the sum check.
void print_attribution(const LogitAttribution& a, const std::string& checkpoint, const std::string& split) {
  std::printf("direct logit attribution, %s, %s split: %s in %s, mean logit of the correct token %.4f\n",
              checkpoint.c_str(), split.c_str(), counted(a.targets, "target").c_str(),
              counted(a.batches, "batch", "batches").c_str(), a.mean_logit);
  std::vector<const DlaComponent*> order;
  for (const DlaComponent& c : a.components) order.push_back(&c);
  std::sort(order.begin(), order.end(),
            [](const DlaComponent* x, const DlaComponent* y) { return std::abs(x->mean) > std::abs(y->mean); });
  for (size_t i = 0; i < std::min<size_t>(order.size(), 8); ++i)
    std::printf("  %-14s %+.4f\n", order[i]->label.c_str(), order[i]->mean);
  std::printf("terms add up to the logit within %.3g (the largest difference over targets)\n", a.max_sum_error);
  std::printf("logit lens:  layer      loss  accuracy  mean logit  mean prob\n");
  for (const LensLayer& l : a.lens)
    std::printf("             %5lld  %8.4f  %8.4f  %10.4f  %9.4f\n", static_cast<long long>(l.layer), l.loss,
                l.accuracy, l.mean_logit, l.mean_prob);
}

// One text by the model's tokenizer, for --prompt and the options that go with it.
std::vector<int32_t> encoded(const cxxopts::ParseResult& args, const char* option, const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  tokenizer.encode(args[option].as<std::string>(), ids);
  return ids;
}

// The patching inputs: --prompt/--corrupt (and a translation model's --target) by the model's
// tokenizer, else generated pairs.
PatchingInputs patching_inputs(const cxxopts::ParseResult& args, const OpenedCheckpoint& opened, int64_t rows,
                               int64_t half, int64_t seed) {
  const ModelSpec& spec = opened.model->spec();
  const bool translation = model_kind_info(spec.kind).source;
  PatchingInputs in;
  if (!args.count("prompt")) {
    HEADLAB_CHECK(!args.count("corrupt") && !args.count("target") && !args.count("answer") && !args.count("wrong"),
                  "--corrupt, --target, --answer and --wrong go with --prompt");
    if (translation) {
      const TranslationDataset* data = opened.dataset->translation();
      HEADLAB_CHECK(data != nullptr, "--patch: the checkpoint's data.task = "
                                         << opened.config.data.task
                                         << " has no sentences to swap; give --prompt, --corrupt and --target");
      in = source_swap_pairs(*data, Split::val, rows);
    } else {
      in = repeated_token_pairs(rows, half, spec.vocab_size, static_cast<uint64_t>(seed));
    }
  } else {
    HEADLAB_CHECK(args.count("corrupt"), "--prompt needs --corrupt, the corrupted text of the same length");
    HEADLAB_CHECK(translation == (args.count("target") > 0),
                  (translation ? "--prompt: a translation model needs --target, the reference both runs decode"
                               : "--target is for a translation model (model.kind = encoder_decoder)"));
    const Tokenizer* tokenizer = opened.dataset->tokenizer();
    HEADLAB_CHECK(tokenizer != nullptr,
                  "--prompt: the checkpoint's data.task = " << opened.config.data.task
                                                            << " has no tokenizer; leave "
                                                               "--prompt out for generated pairs");
    const std::vector<int32_t> clean = encoded(args, "prompt", *tokenizer),
                               corrupt = encoded(args, "corrupt", *tokenizer);
    HEADLAB_CHECK(clean.size() == corrupt.size(), "--prompt is " << clean.size() << " tokens and --corrupt "
                                                                 << corrupt.size()
                                                                 << "; patching needs inputs of the same length");
    in.rows = 1;
    if (translation) {  // sources + </s>; both runs decode <s> + the target, scored on target + </s>
      const SpecialTokens specials = tokenizer->specials();
      const std::vector<int32_t> target = encoded(args, "target", *tokenizer);
      in.clean_source = clean;
      in.corrupt_source = corrupt;
      in.clean_source.push_back(specials.eos);
      in.corrupt_source.push_back(specials.eos);
      in.source_len = static_cast<int64_t>(in.clean_source.size());
      in.clean = {specials.bos};
      in.clean.insert(in.clean.end(), target.begin(), target.end());
      in.corrupt = in.clean;
      in.targets = target;
      in.targets.push_back(specials.eos);
      in.seq_len = static_cast<int64_t>(in.clean.size());
    } else {
      in.seq_len = static_cast<int64_t>(clean.size());
      in.clean = clean;
      in.corrupt = corrupt;
      in.targets.assign(clean.size(), -1);
      for (size_t t = 0; t + 1 < clean.size(); ++t) in.targets[t] = clean[t + 1];
    }
    HEADLAB_CHECK(args.count("answer") == args.count("wrong"), "--answer and --wrong go together");
    if (args.count("answer")) {
      for (const char* option : {"answer", "wrong"}) {
        const std::vector<int32_t> ids = encoded(args, option, *tokenizer);
        HEADLAB_CHECK(ids.size() == 1, "--" << option << " '" << escaped(args[option].as<std::string>()) << "' is "
                                            << ids.size()
                                            << " tokens of the model's vocabulary; a logit difference needs one");
        (std::string(option) == "answer" ? in.answer : in.wrong) = ids[0];
      }
    }
  }
  check_patching_inputs(spec, in);
  return in;
}

// What was asked: the analyses, the checkpoints (every one of a run for the weight- and detector-
// based analyses, else the one resolve_checkpoint picks) and the detectors' generated inputs.
struct Request {
  bool detectors = false, composition = false, dla = false, patch = false, path_patch = false;
  std::string path;
  std::vector<CheckpointFile> files;
  int64_t rows = 0, half = 0, seed = 0;
};

cxxopts::Options circuits_options() {
  cxxopts::Options options("headlab circuits",
                           "How heads cooperate: head detectors and composition scores, along training.");
  options.positional_help("CHECKPOINT.h5 | RUN");
  options.add_options()("checkpoint", "checkpoint file (.h5), or a run folder (every checkpoints/step_<N>.h5)",
                        cxxopts::value<std::string>())(
      "detectors",
      "every head's previous-token, duplicate-token, induction and prefix-matching score on repeated random "
      "tokens: detectors.csv and detectors.h5")(
      "rows", "--detectors, generated --patch pairs: random sequences (or swapped sentences)",
      cxxopts::value<int64_t>()->default_value("32"))(
      "half", "--detectors, generated --patch pairs: tokens before the repeat (default: half of data.seq_len)",
      cxxopts::value<int64_t>())("seed", "--detectors, generated --patch pairs: the random tokens' seed",
                                 cxxopts::value<int64_t>()->default_value("0"))(
      "composition",
      "Q-, K- and V-composition scores of every pair of heads where one reads what the other writes, and each "
      "head's OV copying score (models with an LM head): composition.csv, ov_copying.csv")(
      "dla",
      "direct logit attribution to the correct token of every head, attention bias and MLP, and the logit lens, "
      "over --split (one checkpoint: the given one, or the run's best): dla.csv, logit_lens.csv")(
      "split", "--dla: val, test or train", cxxopts::value<std::string>()->default_value("val"))(
      "batches", "--dla: batches (default: the whole split, or train.eval_batches for generated tasks)",
      cxxopts::value<int64_t>())("batch-size", "--dla: rows per batch (default: train.batch_size)",
                                 cxxopts::value<int64_t>())(
      "patch",
      "activation patching, clean into corrupted, of every head's output, queries, keys and values and of the "
      "residual stream at every block and position: patching_heads.csv, patching_resid.csv")(
      "path-patch", "path patching of every head into every later head's queries, keys and values: path_patching.csv")(
      "prompt", "--patch, --path-patch: the clean text (a text model) or source (a translation model)",
      cxxopts::value<std::string>())("corrupt",
                                     "--patch, --path-patch: the corrupted text or source, as many tokens as --prompt",
                                     cxxopts::value<std::string>())(
      "target", "--prompt of a translation model: the reference both runs decode, whose loss is the metric",
      cxxopts::value<std::string>())(
      "answer", "--prompt: the metric is logit(answer) - logit(wrong) at the last position (one token each)",
      cxxopts::value<std::string>())("wrong", "--prompt: see --answer", cxxopts::value<std::string>())(
      "out", "folder for the files (default: the run folder)", cxxopts::value<std::string>())(
      "threads", "worker threads (default: the checkpoint's train.threads)", cxxopts::value<int>())("h,help",
                                                                                                    "show this help");
  return options;
}

// The analyses asked for, checked against the model of the first checkpoint (its config fixes
// the model's kind, the inputs and the threads): one line for what cannot be scored.
Request checked_request(const cxxopts::ParseResult& args) {
  HEADLAB_CHECK(args.count("checkpoint"), "no checkpoint given (usage: headlab circuits CHECKPOINT|RUN --detectors)");
  Request r;
  r.detectors = args.count("detectors") > 0;
  r.composition = args.count("composition") > 0;
  r.dla = args.count("dla") > 0;
  r.patch = args.count("patch") > 0;
  r.path_patch = args.count("path-patch") > 0;
  HEADLAB_CHECK(
      r.detectors || r.composition || r.dla || r.patch || r.path_patch,
      "no analysis given: --detectors, --composition, --dla, --patch, --path-patch (headlab circuits --help)");
  for (const char* option : {"prompt", "corrupt", "target", "answer", "wrong"})
    HEADLAB_CHECK(r.patch || r.path_patch || !args.count(option),
                  "--" << option << " goes with --patch or --path-patch");
  r.path = args["checkpoint"].as<std::string>();
  r.files = r.detectors || r.composition ? checkpoints_of(r.path)
                                         : std::vector<CheckpointFile>{{-1, resolve_checkpoint(r.path)}};
  r.rows = *count_option<int64_t>(args, "rows", 1);
  r.seed = *count_option<int64_t>(args, "seed", 0);

  const Config config = checkpoint_config(r.files.front().path);
  const ModelSpec spec = model_spec(config);
  const ModelKindInfo& kind = model_kind_info(spec.kind);
  const std::string& first = r.files.front().path;
  const std::string problem = detector_model_problem(spec);
  HEADLAB_CHECK(!r.detectors || problem.empty(), "--detectors: " << first << ": " << problem);
  r.half = count_option<int64_t>(args, "half", 1)
               .value_or(std::max<int64_t>(1, std::min(config.data.seq_len, spec.max_seq_len) / 2));
  HEADLAB_CHECK(!r.detectors || 2 * r.half <= spec.max_seq_len,
                "--half " << r.half << ": sequences of 2 x " << r.half
                          << " tokens are longer than the model's max_seq_len " << spec.max_seq_len);
  HEADLAB_CHECK(!r.dla || kind.lm_head, "--dla: " << first << ": a " << kind.name
                                                  << " model; it reads an LM head (model.kind = decoder or "
                                                     "encoder_decoder)");
  HEADLAB_CHECK(!(r.patch || r.path_patch) || kind.lm_head,
                (r.patch ? "--patch: " : "--path-patch: ")
                    << first << ": a " << kind.name << " model; patching reads an LM head (model.kind = decoder or "
                    << "encoder_decoder)");
  const std::optional<int> threads = count_option<int>(args, "threads", 1);
  set_num_threads(threads ? *threads : resolved_threads(config));
  return r;
}

// The weight- and attention-based analyses of every checkpoint, in step order.
struct AlongTraining {
  DetectorCurves curves;  // its steps are every checkpoint's, detectors or not
  std::vector<CompositionScores> compositions;
  std::vector<std::vector<double>> copying;
  bool copying_scored = false;  // the OV circuit ends in an LM head
};

AlongTraining score_checkpoints(const Request& r) {
  AlongTraining t;
  const ModelSpec spec = model_spec(checkpoint_config(r.files.front().path));
  t.curves.inputs = repeated_random_tokens(r.rows, r.half, spec.vocab_size, static_cast<uint64_t>(r.seed));
  t.curves.run = r.path;
  t.copying_scored = model_kind_info(spec.kind).lm_head;
  for (const CheckpointFile& file : r.files) {
    Model<float> model(model_spec(checkpoint_config(file.path)));
    HEADLAB_CHECK(model.spec().kind == spec.kind && model.spec().vocab_size == spec.vocab_size,
                  file.path << ": not the model of " << r.files.front().path);
    const RunProgress progress = load_training_checkpoint(file.path, model, nullptr);
    t.curves.steps.push_back(progress.step);
    if (r.detectors) {
      t.curves.scores.push_back(detect_heads(model, t.curves.inputs));
      print_top_heads(progress.step, t.curves.scores.back());
    }
    if (r.composition) {
      t.compositions.push_back(composition_scores(model));
      if (t.copying_scored) t.copying.push_back(ov_copying_scores(model));
    }
  }
  return t;
}

// Activation and path patching of the one checkpoint, timed (the count of reruns with it).
void run_patching(const cxxopts::ParseResult& args, const Request& r, std::optional<ActivationPatching>& patched,
                  std::optional<PathPatching>& paths) {
  const std::string checkpoint = resolve_checkpoint(r.path);
  OpenedCheckpoint opened = open_checkpoint(checkpoint);
  const PatchingInputs in = patching_inputs(args, opened, r.rows, r.half, r.seed);
  std::printf("patching %s: %s of %lld tokens, metric %s\n", checkpoint.c_str(), counted(in.rows, "row").c_str(),
              static_cast<long long>(in.seq_len), in.metric_name().c_str());
  if (r.patch) {
    const double t0 = wall_seconds();
    patched = activation_patching(*opened.model, in);
    std::printf("activation patching: clean %.6g, corrupted %.6g; %lld forwards in %.4f s\n", patched->clean,
                patched->corrupt, static_cast<long long>(patched->forwards), wall_seconds() - t0);
  }
  if (r.path_patch) {
    const double t0 = wall_seconds();
    paths = path_patching(*opened.model, in);
    std::printf("path patching: clean %.6g, corrupted %.6g; %lld forwards in %.4f s\n", paths->clean, paths->corrupt,
                static_cast<long long>(paths->forwards), wall_seconds() - t0);
  }
}

LogitAttribution run_dla(const cxxopts::ParseResult& args, const Request& r) {
  const std::string checkpoint = resolve_checkpoint(r.path);
  OpenedCheckpoint opened = open_checkpoint(checkpoint);
  const Split split = parse_split(args["split"].as<std::string>(), true);
  const int64_t batch_size = count_option<int64_t>(args, "batch-size", 1).value_or(opened.config.train.batch_size);
  const int64_t batches = count_option<int64_t>(args, "batches", 1)
                              .value_or(default_eval_batches(opened.config, *opened.dataset, split, batch_size));
  LogitAttribution a = logit_attribution(*opened.model, *opened.dataset, split, batches, batch_size);
  print_attribution(a, checkpoint, args["split"].as<std::string>());
  return a;
}

}  // namespace

int run_circuits(int argc, char** argv) {
  cxxopts::Options options = circuits_options();
  const auto parsed = parse_options(options, {"checkpoint"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  const Request r = checked_request(args);

  // Everything is computed before anything is written: a failure leaves no partial output.
  const AlongTraining t = r.detectors || r.composition ? score_checkpoints(r) : AlongTraining{};
  std::optional<ActivationPatching> patched;
  std::optional<PathPatching> paths;
  if (r.patch || r.path_patch) run_patching(args, r, patched, paths);
  std::optional<LogitAttribution> attribution;
  if (r.dla) attribution = run_dla(args, r);

  const fs::path out = args.count("out")          ? fs::path(args["out"].as<std::string>())
                       : fs::is_directory(r.path) ? fs::path(r.path)
                                                  : fs::path(checkpoint_run_folder(r.path));
  fs::create_directories(out);
  const std::string checkpoints = counted(static_cast<int64_t>(r.files.size()), "checkpoint");
  if (r.detectors) {
    write_detectors_csv((out / "detectors.csv").string(), t.curves);
    write_detectors_h5((out / "detectors.h5").string(), t.curves);
    std::printf("%s on %lld sequences of 2 x %lld random tokens (seed %lld): wrote %s/detectors.csv and detectors.h5\n",
                checkpoints.c_str(), static_cast<long long>(r.rows), static_cast<long long>(r.half),
                static_cast<long long>(r.seed), out.string().c_str());
  }
  if (patched) {
    write_activation_patching(out.string(), *patched);
    std::printf("wrote %s/patching_heads.csv and patching_resid.csv\n", out.string().c_str());
  }
  if (paths) {
    write_path_patching((out / "path_patching.csv").string(), *paths);
    std::printf("wrote %s/path_patching.csv\n", out.string().c_str());
  }
  if (attribution) {
    write_dla_csv((out / "dla.csv").string(), *attribution);
    write_logit_lens_csv((out / "logit_lens.csv").string(), *attribution);
    std::printf("wrote %s/dla.csv and logit_lens.csv\n", out.string().c_str());
  }
  if (r.composition) {
    write_composition_csv((out / "composition.csv").string(), t.curves.steps, t.compositions);
    print_top_compositions(t.compositions.back());
    if (t.copying_scored)
      write_copying_csv((out / "ov_copying.csv").string(), t.curves.steps, t.compositions, t.copying);
    std::printf("composition scores of %s: wrote %s/composition.csv%s\n", checkpoints.c_str(), out.string().c_str(),
                t.copying_scored ? " and ov_copying.csv" : " (no ov_copying.csv: the model has no LM head)");
  }
  return 0;
}

}  // namespace headlab::cli
