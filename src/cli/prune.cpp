// headlab prune CHECKPOINT|RUN --strategy importance|importance_raw|integrated_gradients|magnitude|random|entropy|
//                                     confidence|ablation|l0|none [--ig-steps N]
//                          [--unit heads|ffn|attention_layers|ffn_blocks]
//                          [--step-frac 0.1] [--finetune-steps K] [--finetune-lr X] [--recompute]
//                          [--recover finetune|distill [--distill-alpha A] [--distill-temperature T]]
//                          [--rounds N] [--seed N]
//                          [--split val|test] [--batches N] [--score-batches N]
//                          [--lambda X] [--l0-steps N] [--l0-lr X] [--l0-freeze]
//                          [--l0-penalty layer_mean|mean|sum] [--only enc|dec|cross]...
//                          [--beam N] [--lenpen X] [--sentences N] [--no-bleu] [--out DIR] [--set train.key=value]...
// Prunes heads (or FFN hidden units, whole attention layers, whole FFN blocks) by masking their
// gates (prune/prune_loop.h) and
// writes DIR/prune.csv (rewritten after every round) and DIR/pruned.h5 (the last round's model: an
// ordinary checkpoint, with the optimizer state fine-tuning continued, so `train --init` of it
// continues it too), and DIR/pruned_small.h5, the same with the masked heads (units) cut out.
// DIR defaults to <run folder>/prune/<prune_run_name()>. A translation model's rounds are also
// scored in BLEU and chrF (beam 5 unless --beam says otherwise). docs/pruning-verb.md.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/common/parallel.h"
#include "headlab/nn/prune.h"
#include "headlab/prune/prune_loop.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"
#include "options.h"
#include "verbs.h"

namespace headlab::cli {

namespace fs = std::filesystem;

int run_prune(int argc, char** argv) {
  cxxopts::Options options("headlab prune",
                           "Prune attention heads (or FFN units) of a checkpoint by masking their gates.");
  options.positional_help("CHECKPOINT.h5 | RUN");
  options.add_options()("checkpoint", "checkpoint file (.h5), or a run folder (its best.h5, else its newest)",
                        cxxopts::value<std::string>())(
      "strategy",
      "importance, importance_raw, integrated_gradients, random, entropy, confidence, ablation, l0, or none "
      "(fine-tuning only: the control); magnitude for FFN units",
      cxxopts::value<std::string>())("step-frac", "fraction of all heads pruned per round",
                                     cxxopts::value<double>()->default_value("0.1"))(
      "finetune-steps", "training steps after each round", cxxopts::value<int64_t>()->default_value("0"))(
      "finetune-lr", "constant fine-tuning rate (default: the rate the checkpoint's schedule had reached)",
      cxxopts::value<double>())("rounds", "none: rounds of fine-tuning (default: as many as pruning takes)",
                                cxxopts::value<int64_t>())("recompute", "recompute the scores after every round")(
      "seed", "seed for the random order, fine-tuning dropout and L0 noise",
      cxxopts::value<uint64_t>()->default_value("0"))("split", "split the metric is measured on: val or test",
                                                      cxxopts::value<std::string>()->default_value("val"))(
      "batches", "batches of the split at every round (default: the whole split, or train.eval_batches)",
      cxxopts::value<int64_t>())("score-batches",
                                 "training batches the scores are measured on (default: train.eval_batches)",
                                 cxxopts::value<int64_t>())(
      "ig-steps", "integrated_gradients: points of the gates' path", cxxopts::value<int64_t>()->default_value("20"))(
      "unit",
      "what to prune: heads (attention heads), ffn (FFN hidden units), attention_layers (every head of a layer at "
      "once) or ffn_blocks (every unit of an FFN block at once)",
      cxxopts::value<std::string>()->default_value("heads"))(
      "recover",
      "how the fine-tuning steps train: finetune (the hard targets) or distill (the model as loaded teaches its "
      "pruned self: (1 - alpha) hard + alpha soft loss)",
      cxxopts::value<std::string>()->default_value("finetune"))(
      "distill-alpha", "--recover distill: weight of the soft loss", cxxopts::value<double>()->default_value("0.5"))(
      "distill-temperature", "--recover distill: temperature of both softmaxes",
      cxxopts::value<double>()->default_value("2"))("lambda", "l0: penalty weight", cxxopts::value<double>())(
      "l0-steps", "l0: fine-tuning steps with the stochastic gates", cxxopts::value<int64_t>()->default_value("200"))(
      "l0-lr", "l0: Adam learning rate of log_alpha", cxxopts::value<double>()->default_value("0.1"))(
      "l0-freeze", "l0: train only the gates, the model's parameters frozen (default: both train)")(
      "l0-penalty",
      "l0: how the heads' P(gate != 0) add up under lambda: layer_mean (each layer's sum, averaged over layers, as "
      "Voita et al.'s code), mean (over heads) or sum (default: layer_mean)",
      cxxopts::value<std::string>())(
      "only", "prune only these kinds of an encoder_decoder's attention: enc, dec, cross (comma list or repeated)",
      cxxopts::value<std::vector<std::string>>())(
      "sentences", "translation: BLEU of every round over the split's first N sentences (default all)",
      cxxopts::value<int64_t>())("no-bleu", "translation: no BLEU, the loss only")(
      "out",
      "output folder (default: <run "
      "folder>/prune/<strategy>[_ffn|_attention_layers|_ffn_blocks][_<kind>...][_ft<K>][_distill][_recompute][_seed<N>]"
      "[_lambda<X>][_penalty_<P>][_frozen])",
      cxxopts::value<std::string>())(
      "set", "change a train.* or data.* key of the checkpoint's config, e.g. --set train.lr=1e-4 (repeatable)",
      cxxopts::value<std::vector<std::string>>())("h,help", "show this help");
  add_search_options(options, 5);
  const auto parsed = parse_options(options, {"checkpoint"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  // Every check before anything is read or written.
  HEADLAB_CHECK(args.count("checkpoint"), "no checkpoint given (usage: headlab prune CHECKPOINT --strategy S)");
  HEADLAB_CHECK(args.count("strategy"), "no --strategy given (e.g. --strategy importance; see --help)");
  PruneOptions o;
  o.strategy = parse_prune_strategy(args["strategy"].as<std::string>());
  const PruneUnit unit = parse_prune_unit(args["unit"].as<std::string>());
  o.unit = unit.gates;
  o.whole = unit.whole;
  const std::string recover = args["recover"].as<std::string>();
  HEADLAB_CHECK(recover == "finetune" || recover == "distill",
                "--recover must be finetune or distill, got '" << recover << "'");
  o.distill = recover == "distill";
  HEADLAB_CHECK(o.distill || !(args.count("distill-alpha") || args.count("distill-temperature")),
                "--distill-alpha and --distill-temperature apply only to --recover distill");
  o.distill_alpha = args["distill-alpha"].as<double>();
  o.distill_temperature = args["distill-temperature"].as<double>();
  const bool l0 = o.strategy == PruneStrategy::l0;
  o.step_frac = args["step-frac"].as<double>();
  o.finetune_steps = *count_option<int64_t>(args, "finetune-steps", 0);
  if (args.count("finetune-lr")) {
    o.finetune_lr = args["finetune-lr"].as<double>();
    HEADLAB_CHECK(o.finetune_lr > 0, "--finetune-lr must be positive, got " << o.finetune_lr);
  }
  HEADLAB_CHECK(!args.count("finetune-lr") || o.finetune_steps > 0 || l0,
                "--finetune-lr needs fine-tuning (--finetune-steps K, or --strategy l0)");
  if (const auto rounds = count_option<int64_t>(args, "rounds", 1)) o.rounds = *rounds;
  o.recompute = args.count("recompute") > 0;
  o.seed = args["seed"].as<uint64_t>();
  const std::string split_arg = args["split"].as<std::string>();
  o.split = parse_split(split_arg, false);
  if (const auto batches = count_option<int64_t>(args, "batches", 1)) o.eval_batches = *batches;
  if (const auto batches = count_option<int64_t>(args, "score-batches", 1)) o.score_batches = *batches;
  o.ig_steps = *count_option<int64_t>(args, "ig-steps", 1);
  HEADLAB_CHECK(o.strategy == PruneStrategy::integrated_gradients || !args.count("ig-steps"),
                "--ig-steps applies only to --strategy integrated_gradients");
  HEADLAB_CHECK(
      l0 || !(args.count("lambda") || args.count("l0-steps") || args.count("l0-lr") || args.count("l0-penalty")),
      "--lambda, --l0-steps, --l0-lr and --l0-penalty apply only to --strategy l0");
  HEADLAB_CHECK(!l0 || !(args.count("finetune-steps") || args.count("recompute") || args.count("step-frac")),
                "--strategy l0 fine-tunes --l0-steps steps once; --finetune-steps, --recompute and --step-frac do "
                "not apply");
  HEADLAB_CHECK(!l0 || args.count("lambda"), "--strategy l0 needs --lambda X (X >= 0)");
  if (l0) o.lambda = args["lambda"].as<double>();
  o.l0_steps = *count_option<int64_t>(args, "l0-steps", 1);
  o.l0_lr = args["l0-lr"].as<double>();
  HEADLAB_CHECK(l0 || !args.count("l0-freeze"), "--l0-freeze applies only to --strategy l0");
  o.l0_freeze = args.count("l0-freeze") > 0;
  if (args.count("l0-penalty")) o.l0_penalty = parse_l0_penalty(args["l0-penalty"].as<std::string>());
  if (args.count("only")) o.only = parse_attention_kinds(args["only"].as<std::vector<std::string>>());
  o.bleu = !args.count("no-bleu");
  for (const char* option : {"beam", "lenpen", "sentences"})
    HEADLAB_CHECK(o.bleu || !args.count(option), "--" << option << " decodes for BLEU, which --no-bleu turns off");
  o.search = search_options(args);
  o.bleu_sentences = count_option<int64_t>(args, "sentences", 1).value_or(0);
  validate(o);
  const std::vector<std::string> overrides = checkpoint_overrides(args, {"train.", "data."});
  const std::string path = resolve_checkpoint(args["checkpoint"].as<std::string>());
  HEADLAB_CHECK(fs::is_regular_file(path), "checkpoint " << path << " does not exist");
  OpenedCheckpoint opened = open_checkpoint(path, overrides);
  const bool translation = opened.dataset->translation() != nullptr;
  for (const char* option : {"beam", "lenpen", "sentences", "no-bleu"})
    HEADLAB_CHECK(translation || !args.count(option), "--" << option << ": " << path
                                                           << " models data.task = " << opened.config.data.task
                                                           << "; BLEU is measured on translation models only");
  validate(o, opened.model->spec());
  set_num_threads(resolved_threads(opened.config));
  const fs::path out = args.count("out") ? fs::path(args["out"].as<std::string>())
                                         : fs::path(checkpoint_run_folder(path)) / "prune" / prune_run_name(o);

  fs::create_directories(out);
  std::printf("pruning %s (step %lld) by %s -> %s\n", path.c_str(), static_cast<long long>(opened.progress.step),
              prune_strategy_name(o.strategy), out.string().c_str());
  std::unique_ptr<Optimizer<float>> optimizer = make_optimizer(opened.config, opened.model->params());
  const bool continued = continue_optimizer_state(path, *optimizer);  // pruned.h5 keeps it either way
  if (o.finetune_steps > 0 || l0) {
    std::printf("fine-tuning at lr %g from %s\n", finetune_rate(opened.config, o, opened.progress.step),
                continued ? "the checkpoint's optimizer state" : "fresh optimizer moments (the checkpoint holds none)");
  }
  const std::vector<PruneRound> rounds =
      iterative_prune(*opened.model, *optimizer, opened.config, *opened.dataset, o, opened.progress.step,
                      [&](const std::vector<PruneRound>& done) {
                        write_file_atomically(out / "prune.csv", prune_csv(done, o));
                        const PruneRound& r = done.back();
                        const bool ffn = o.unit == GateKind::ffn_units;
                        std::string sites;  // appended: on " " + std::to_string(c), GCC 12 warns falsely (-Wrestrict)
                        for (int64_t c : ffn ? r.units_per_block : r.heads_per_site)
                          sites.append(" ").append(std::to_string(c));
                        std::printf("round %lld: %s pruned, %s per %s%s, %s loss %.4f", static_cast<long long>(r.round),
                                    counted(static_cast<int64_t>(r.pruned.size()), ffn ? "FFN unit" : "head").c_str(),
                                    ffn ? "units" : "heads",
                                    ffn           ? "block"
                                    : translation ? "site"
                                                  : "layer",
                                    sites.c_str(), split_arg.c_str(), r.metric.loss);
                        if (r.bleu >= 0) std::printf(", BLEU %.2f, chrF %.2f", r.bleu, r.chrf);
                        std::printf("\n");
                        std::fflush(stdout);
                      });
  RunProgress progress = opened.progress;
  progress.step = rounds.back().step;
  save_training_checkpoint((out / "pruned.h5").string(), opened.config, *opened.model, optimizer.get(), progress,
                           opened.dataset->tokenizer());
  std::printf("wrote %s/prune.csv and pruned.h5\n", out.string().c_str());
  // The same model with the masked heads (units) physically removed, when nn/prune.h's one check
  // allows it (it does not for GQA/MQA heads); a layer (block) that kept none goes whole.
  if (o.unit == GateKind::ffn_units) {
    const UnitKeepMask keep = units_with_nonzero_gates(*opened.model);
    if (const std::string why = prune_units_problem(opened.model->spec(), keep); why.empty()) {
      const Model<float> small = prune_units(*opened.model, keep);
      save_pruned_checkpoint((out / "pruned_small.h5").string(), opened.config, small, progress.step,
                             opened.dataset->tokenizer());
      std::printf("wrote %s/pruned_small.h5 (FFN units removed from the tensors: %lld of %lld parameters left)\n",
                  out.string().c_str(), static_cast<long long>(small.params().count()),
                  static_cast<long long>(opened.model->params().count()));
    } else {
      std::printf("no pruned_small.h5: %s\n", why.c_str());
    }
    return 0;
  }
  const HeadKeepMask keep = heads_with_nonzero_gates(*opened.model);
  if (const std::string why = prune_problem(opened.model->spec(), keep); why.empty()) {
    save_pruned_checkpoint((out / "pruned_small.h5").string(), opened.config, prune_heads(*opened.model, keep),
                           progress.step, opened.dataset->tokenizer());
    std::printf("wrote %s/pruned_small.h5 (heads removed from the tensors)\n", out.string().c_str());
  } else {
    std::printf("no pruned_small.h5: %s\n", why.c_str());
  }
  return 0;
}

}  // namespace headlab::cli
