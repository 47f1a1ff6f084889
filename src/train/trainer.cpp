#include "headlab/common/files.h"
#include "headlab/common/timing.h"
#include "headlab/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/common/signals.h"
#include "headlab/data/task_registry.h"
#include "headlab/data/text.h"
#include "headlab/decode/translate_split.h"
#include "headlab/dist/dist.h"
#include "headlab/io/csv.h"
#include "headlab/io/provenance.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/distillation.h"
#include "headlab/train/evaluate.h"
#include "headlab/train/run_folder.h"
#include "headlab/train/setup.h"
#include "headlab/train/step.h"

namespace headlab {

const char* const kMetricsHeader =
    "step,tokens,lr,train_loss,val_loss,val_accuracy,val_bpb,val_bleu,grad_norm,tokens_per_s,elapsed_s";
const char* const kMetricsHeaderBeforeBleu =
    "step,tokens,lr,train_loss,val_loss,val_accuracy,val_bpb,grad_norm,tokens_per_s,elapsed_s";

namespace fs = std::filesystem;

namespace {

// A row of a metrics file headed kMetricsHeaderBeforeBleu, as kMetricsHeader heads it: val_bleu
// empty (those runs logged none).
std::vector<std::string> with_empty_bleu(std::vector<std::string> row) {
  const std::vector<std::string> header = split_csv_line(kMetricsHeaderBeforeBleu);
  const auto at = std::find(header.begin(), header.end(), "grad_norm") - header.begin();
  row.insert(row.begin() + at, "");
  return row;
}

// metrics.csv on resume: keep the header and the rows up to `step`, drop the rest (they are
// replayed), so the file ends as if the run had never stopped. A file headed as before val_bleu
// existed is rewritten with the current header and an empty val_bleu in its kept rows, so a run
// trained before it resumes; any other header is refused.
void truncate_metrics(const fs::path& path, int64_t step) {
  HEADLAB_CHECK(fs::is_regular_file(path), "cannot resume: " << path.string() << " is missing");
  const CsvTable table = read_csv(path, "headlab metrics file");
  const std::string header = csv_line(table.header);
  const bool before_bleu = header == std::string(kMetricsHeaderBeforeBleu) + "\n";
  HEADLAB_CHECK(header == std::string(kMetricsHeader) + "\n" || before_bleu,
                path.string() << ": unexpected header, not a headlab metrics file");
  std::string kept = std::string(kMetricsHeader) + "\n";
  const size_t step_column = table.column("step");
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const std::string& text = table.rows[r][step_column];
    char* end = nullptr;
    const long long row_step = std::strtoll(text.c_str(), &end, 10);
    HEADLAB_CHECK(!text.empty() && *end == '\0' && row_step >= 0, "cannot resume: " << path.string() << ":"
                                                                                    << table.lines[r] << ": step '"
                                                                                    << text << "' is not a step count");
    if (row_step > step) break;
    kept += csv_line(before_bleu ? with_empty_bleu(table.rows[r]) : table.rows[r]);
  }
  write_file_atomically(path, kept);
}

std::string format_optional(double value, bool present) {
  return present ? csv_number("%.6g", value) : "";
}

std::string format_duration(double s) {
  char buf[32];
  const int total = static_cast<int>(s);
  if (total >= 3600)
    std::snprintf(buf, sizeof buf, "%dh%02dm", total / 3600, total / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%dm%02ds", total / 60, total % 60);
  return buf;
}

}  // namespace

// run_training runs in stages, each a function below, in this order:
//   1. check_inputs      the config, model spec and dataset: all that can fail on bad input
//                        fails here, before anything is written;
//   2. (run_training)    the model, seeded, and its optimizer;
//   3. claim_run_folder  rank 0 locks the run folder and chooses the checkpoint to resume from;
//   4. start_run         the resumed checkpoint's or --init's weights and optimizer state, then
//                        config.toml and metrics.csv;
//   5. train_steps       the step loop; after each step rank 0 evaluates, writes the metrics row,
//                        prints progress and checkpoints, each when due (StepLog);
//   6. summarize         the RunResult, and the prefetcher's data line.
// Under mpirun every rank runs every stage: each builds the model, reads the checkpoint and
// trains its share of every step; rank 0 alone locks the folder, evaluates and writes
// config.toml, metrics.csv and checkpoints (the other ranks' logging counters go unused). Stages
// 1, 3 and 4, and the record of each step, do their work inside dist::together, so a failure on
// any rank is one error on all of them, never a rank left waiting.
namespace {

// The given config with the init_from checkpoint's model section. A model key the command line
// set must say what the checkpoint says, or it would be silently dropped; model.dropout, which no
// parameter depends on, is the one that applies.
Config with_init_model(const Config& given, const RunOptions& options) {
  Config config = given;
  config.model = checkpoint_config(options.init_from).model;
  for (const std::string& key : options.set_keys) {
    if (key.rfind("model.", 0) != 0) continue;
    if (key == "model.dropout") {
      config.model.dropout = given.model.dropout;
      continue;
    }
    const std::string wanted = config_value(given, key), fixed = config_value(config, key);
    HEADLAB_CHECK(wanted == fixed, "--set " << key << "=" << wanted << " contradicts --init " << options.init_from
                                            << ", whose model has " << key << "=" << fixed
                                            << " (--init keeps the checkpoint's model; only model.dropout may change)");
  }
  return config;
}

// The run's config: the given one, with the model section of the init_from checkpoint if any,
// and a text corpus's (or translation files') path that holds from any working directory (the run
// folder may move).
Config run_config(const Config& given, const RunOptions& options) {
  Config config = options.init_from.empty() ? given : with_init_model(given, options);
  const TaskFamily family = task_named(config.data.task).family;
  if (family == TaskFamily::text) config.data.path = portable_text_path(config.data.path);
  if (family == TaskFamily::parallel && config.data.path != kBibleAlias) {
    config.data.path = portable_text_path(config.data.path);
    if (!config.data.target_path.empty()) config.data.target_path = portable_text_path(config.data.target_path);
  }
  validate(config);
  return config;
}

// 1. The run's config and what it describes.
struct RunInputs {
  Config config;
  ModelSpec spec;
  std::unique_ptr<Dataset> dataset;
  std::unique_ptr<Model<float>> teacher;  // train.teacher's model; nullptr without one
};

// The tokenizer a continued run keeps, so that its tokens stay the ids its model learned: the
// checkpoint it resumes from (--resume auto: the newest in the run folder) or starts from (--init).
// nullptr for a new run, which makes its own.
std::shared_ptr<const Tokenizer> continued_tokenizer(const Config& config, const RunOptions& options) {
  std::string path = options.resume;
  if (path == "auto") {
    const auto newest = newest_checkpoint(options.out_dir);
    path = newest ? newest->path : "";
  }
  if (path.empty()) path = options.init_from;
  return path.empty() ? nullptr : checkpoint_tokenizer(path, config);
}

RunInputs check_inputs(const Config& given, const RunOptions& options) {
  RunInputs in;
  dist::together([&] {
    in.config = run_config(given, options);
    HEADLAB_CHECK(!options.out_dir.empty(), "train: no output directory given");
    micro_batches_of_rank(in.config.train.grad_accum, dist::rank(), dist::size());  // the split is valid
    set_num_threads(resolved_threads(in.config));
    in.spec = model_spec(in.config);
    in.dataset = make_dataset(in.config, continued_tokenizer(in.config, options));
    // Loaded here, before the run folder exists: a teacher that does not fit writes nothing.
    if (!in.config.train.teacher.empty())
      in.teacher = load_teacher(in.config.train.teacher, in.spec, in.dataset->tokenizer());
  });
  return in;
}

// What stages 3 to 6 share: the config, the model and optimizer of stage 2, the run folder.
struct Run {
  const Config& config;
  const RunOptions& options;
  const Dataset& dataset;
  Model<float>& model;
  Optimizer<float>& optimizer;
  Model<float>* teacher;  // train.teacher's model (its logits join each micro-batch's loss); nullptr: none
  fs::path dir;           // the run folder
  bool writer;            // rank 0

  fs::path metrics_path() const { return dir / "metrics.csv"; }
};

// 3. Rank 0 locks the run folder and chooses the checkpoint the run resumes from ("" = none);
// every rank gets its choice.
struct RunFolder {
  std::unique_ptr<FileLock> lock;  // held until the run returns
  std::string resume_path;
};

RunFolder claim_run_folder(const Run& run) {
  const RunOptions& options = run.options;
  RunFolder folder;
  dist::together([&] {
    if (!run.writer) return;
    // One process per run folder: a second `train --out` of it (a rerun sweep while the killed
    // one's runs still stop) would interleave checkpoints and metrics.
    fs::create_directories(run.dir);
    folder.lock = std::make_unique<FileLock>(run.dir / ".lock", "run folder " + run.dir.string());
    if (options.resume == "auto") {
      if (auto newest = newest_checkpoint(run.dir.string()))
        folder.resume_path = newest->path;
      else if (!options.quiet)
        std::fprintf(stderr, "no run in %s: starting a new run\n", run.dir.string().c_str());
    } else if (!options.resume.empty()) {
      folder.resume_path = options.resume;
    } else {
      HEADLAB_CHECK(
          list_checkpoints(run.dir.string()).empty() && !fs::exists(run.metrics_path()),
          run.dir.string() << " already holds a run; use --resume auto to continue it or --out for a new one");
    }
  });
  folder.resume_path = dist::broadcast(folder.resume_path);  // every rank starts from the checkpoint rank 0 chose
  return folder;
}

// 4. Where the run starts (start_run, below).
RunProgress resume_from(const Run& run, const std::string& path) {
  const Config saved = checkpoint_config(path);
  HEADLAB_CHECK(saved.model == run.config.model,
                path << ": trained with a different model section than this config (compare "
                     << (run.dir / "config.toml").string() << ")");
  const RunProgress progress = load_training_checkpoint(path, run.model, &run.optimizer);
  HEADLAB_CHECK(progress.step <= run.config.train.steps,
                path << ": at step " << progress.step << ", beyond train.steps = " << run.config.train.steps);
  if (!run.options.quiet && run.writer)
    std::fprintf(stderr, "resuming %s at step %lld (%s)\n", run.dir.string().c_str(),
                 static_cast<long long>(progress.step), path.c_str());
  return progress;
}

void start_from_init(const Run& run) {
  const std::string& path = run.options.init_from;
  load_training_checkpoint(path, run.model, nullptr);  // the run itself starts at step 0
  // The moments continue where they match: fresh ones would first undo the trained model.
  const bool continued = continue_optimizer_state(path, run.optimizer);
  if (!run.options.quiet && run.writer)
    std::fprintf(stderr, "initializing from %s (its model section replaces the config's): weights and %s\n",
                 path.c_str(),
                 continued ? "optimizer state" : "fresh optimizer moments (it holds no state for this model)");
}

struct CloseFile {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, CloseFile>;

// config.toml, and metrics.csv with its rows up to `step` (none for a new run), left open for
// appending.
File write_run_files(const Run& run, bool resuming, int64_t step) {
  fs::create_directories(run.dir / "checkpoints");
  // Headed by the build that wrote it (on resume, the resuming build; each checkpoint has its own).
  write_file_atomically(run.dir / "config.toml", provenance_comment() + to_toml(run.config));
  // A subword model as sentencepiece saves it (spm_encode --model, Python's sentencepiece read it).
  if (const Tokenizer* t = run.dataset.tokenizer(); t && std::string_view(t->kind()) == "sentencepiece")
    write_file_atomically(run.dir / "tokenizer.model", t->serialized());
  if (!resuming)
    write_file_atomically(run.metrics_path(), std::string(kMetricsHeader) + "\n");
  else
    truncate_metrics(run.metrics_path(), step);
  File metrics(std::fopen(run.metrics_path().c_str(), "a"));
  HEADLAB_CHECK(metrics != nullptr, "cannot append to " << run.metrics_path().string());
  return metrics;
}

struct RunStart {
  RunProgress progress;  // step 0 unless resumed
  File metrics;          // rank 0 only
};

// On every rank, the model and optimizer as the run starts: the resumed checkpoint's, else
// --init's, else as seeded. Then rank 0 writes the folder's files.
RunStart start_run(const Run& run, const std::string& resume_path) {
  RunStart start;
  dist::together([&] {
    if (!resume_path.empty())
      start.progress = resume_from(run, resume_path);
    else if (!run.options.init_from.empty())
      start_from_init(run);
    if (!run.writer) return;
    start.metrics = write_run_files(run, !resume_path.empty(), start.progress.step);
  });
  return start;
}

// 5. The steps (train_steps, below). Their bookkeeping, on every rank: the progress checkpoints
// save, the tokens of the open metrics row and of the run, the clock; and, on rank 0, the record
// of each step.
class StepLog {
 public:
  StepLog(const Run& run, RunProgress& progress, std::FILE* metrics, Batch& eval_batch, Tape<float>& tape)
      : run_(run),
        progress_(progress),
        metrics_(metrics),
        eval_batch_(eval_batch),
        tape_(tape),
        translation_(run.dataset.translation()) {}

  void count(int64_t steps_done, const StepStats& s) {
    progress_.step = steps_done;
    progress_.log_loss_sum += s.loss;
    ++progress_.log_loss_steps;
    progress_.tokens_seen += s.tokens;
    window_tokens_ += s.tokens;
    run_tokens_ += s.tokens;
  }

  // Rank 0, after step progress.step (`last`: the run's final step; `stopping`: the ranks stop
  // after it): evaluation, the metrics row and progress line, the checkpoints, each when due.
  void record(const StepStats& s, bool last, bool stopping, RunResult& result) {
    const TrainConfig& tc = run_.config.train;
    const bool eval_now = last || (tc.eval_every > 0 && progress_.step % tc.eval_every == 0);
    EvalStats e;
    std::optional<double> bleu;
    if (eval_now) {
      e = evaluate(run_.model, run_.dataset, Split::val, tc.eval_batches, eval_batch_, tape_);
      bleu = val_bleu();
      result.val_loss = e.loss;
      result.val_bleu = bleu;
      result.val_step = progress_.step;
    }
    if (eval_now || last || progress_.step % tc.log_every == 0) {
      result.train_loss_from = progress_.step - progress_.log_loss_steps + 1;
      result.train_loss_to = progress_.step;
      result.train_loss = log_row(s, eval_now, e, bleu);
    }
    if (eval_now && (!progress_.has_best || e.loss < progress_.best_val_loss)) {
      progress_.has_best = true;
      progress_.best_val_loss = e.loss;
      checkpoint(best_checkpoint_path(run_.dir.string()));
    }
    if (last || stopping || (tc.checkpoint_every > 0 && progress_.step % tc.checkpoint_every == 0)) {
      checkpoint(checkpoint_path(run_.dir.string(), progress_.step));
      if (tc.keep_checkpoints > 0) prune_checkpoints(run_.dir.string(), static_cast<int>(tc.keep_checkpoints), "");
    }
  }

  bool tty() const { return tty_; }
  double start() const { return start_; }
  int64_t first_step() const { return first_step_; }
  int64_t run_tokens() const { return run_tokens_; }

 private:
  // Corpus BLEU of greedy translations of the first train.eval_bleu_sentences val sentences, for a
  // translation run with the key above 0. The cost is bounded by the key, not by the split; the
  // search changes no parameter and draws no random number, so resume stays exact.
  std::optional<double> val_bleu() {
    const int64_t n = run_.config.train.eval_bleu_sentences;
    if (translation_ == nullptr || n == 0) return std::nullopt;
    return translate_split(run_.model, *translation_, Split::val, SearchOptions{}, n).bleu.score;
  }

  // The metrics.csv row of the steps since the last one, and its progress line; a new row opens.
  // Returns the row's train loss.
  double log_row(const StepStats& s, bool evaluated, const EvalStats& e, std::optional<double> bleu) {
    const double t = wall_seconds(), rate = window_tokens_ / std::max(t - window_start_, 1e-9);
    const double train_loss = progress_.log_loss_sum / progress_.log_loss_steps;
    const std::string row =
        csv_line({std::to_string(progress_.step), std::to_string(progress_.tokens_seen), csv_number("%.6g", s.lr),
                  csv_number("%.6g", train_loss), format_optional(e.loss, evaluated),
                  format_optional(e.accuracy, evaluated && e.accuracy >= 0),
                  format_optional(e.bits_per_byte, evaluated && e.bits_per_byte >= 0),
                  format_optional(bleu.value_or(0), bleu.has_value()), csv_number("%.6g", s.grad_norm),
                  csv_number("%.1f", rate), csv_number("%.2f", elapsed_before_ + t - start_)});
    std::fputs(row.c_str(), metrics_);
    HEADLAB_CHECK(std::fflush(metrics_) == 0, "cannot write " << run_.metrics_path().string() << " (disk full?)");
    if (!run_.options.quiet) print_progress(t, rate, train_loss, evaluated, e, bleu);
    progress_.log_loss_sum = 0;
    progress_.log_loss_steps = 0;
    window_tokens_ = 0;
    window_start_ = t;
    return train_loss;
  }

  // On a terminal, one line rewritten in place, kept when it shows a validation loss.
  void print_progress(double t, double rate, double train_loss, bool evaluated, const EvalStats& e,
                      std::optional<double> bleu) const {
    const int64_t steps = run_.config.train.steps;
    const double eta = (steps - progress_.step) * (t - start_) / (progress_.step - first_step_);
    const std::string val = evaluated ? "  val " + format_optional(e.loss, true) +
                                            (bleu ? "  BLEU " + csv_number("%.2f", *bleu) : std::string())
                                      : std::string();
    char line[256];
    std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f%s  %.0f tok/s  ETA %s",
                  static_cast<long long>(progress_.step), static_cast<long long>(steps), train_loss, val.c_str(), rate,
                  format_duration(eta).c_str());
    if (tty_)
      std::fprintf(stderr, "\r\033[K%s%s", line, evaluated ? "\n" : "");
    else
      std::fprintf(stderr, "%s\n", line);
  }

  void checkpoint(const std::string& path) {
    progress_.elapsed_s = elapsed_before_ + wall_seconds() - start_;
    save_training_checkpoint(path, run_.config, run_.model, &run_.optimizer, progress_, run_.dataset.tokenizer());
  }

  const Run& run_;
  RunProgress& progress_;
  std::FILE* metrics_;
  Batch& eval_batch_;
  Tape<float>& tape_;
  const TranslationDataset* translation_;  // null unless data.task = translate
  const bool tty_ = !run_.options.quiet && isatty(STDERR_FILENO);
  const double start_ = wall_seconds(), elapsed_before_ = progress_.elapsed_s;
  const int64_t first_step_ = progress_.step;
  double window_start_ = start_;
  int64_t window_tokens_ = 0, run_tokens_ = 0;
};

// 6. The run's result, on every rank; with prefetching, how often a batch was ready in time.
void summarize(RunResult& result, const Run& run, const StepLog& log, const RunProgress& progress,
               const BatchPrefetcher& batches) {
  result.step = progress.step;
  result.total_steps = run.config.train.steps;
  result.steps_trained = progress.step - log.first_step();
  if (progress.has_best) result.best_val_loss = progress.best_val_loss;
  result.elapsed_s = wall_seconds() - log.start();
  result.tokens_per_s = log.run_tokens() / std::max(result.elapsed_s, 1e-9);
  if (run.config.train.prefetch) {
    const BatchPrefetcher::Stats d = batches.stats();
    result.batches = d.batches;
    result.batches_ready = d.ready;
    result.data_wait_s = d.wait_s;
    if (!run.options.quiet && d.batches > 1)
      std::fprintf(stderr,
                   "data: %lld of %lld training batches were ready when their step began; %.3f ms waited in all\n",
                   static_cast<long long>(d.ready), static_cast<long long>(d.batches), 1e3 * d.wait_s);
  }
}

// 5 and 6. The steps from progress.step to train.steps, each recorded; the ranks stop together
// after a step on Ctrl-C/SIGTERM (checkpointed), or at once when the test hook returns false.
RunResult train_steps(const Run& run, RunProgress& progress, std::FILE* metrics) {
  const TrainConfig& tc = run.config.train;
  Arena arena;
  Tape<float> tape(arena);
  Batch eval_batch = run.dataset.make_batch(tc.batch_size);
  BatchPrefetcher batches(run.dataset, Split::train, tc.batch_size, tc.prefetch);
  TrainingContext ctx{run.model,
                      run.optimizer,
                      batches,
                      tape,
                      schedule_options(run.config),
                      tc.grad_accum,
                      tc.grad_clip,
                      static_cast<uint64_t>(tc.seed)};
  ctx.label_smoothing = tc.label_smoothing;
  std::unique_ptr<Distillation> distillation;
  if (run.teacher) {
    distillation.reset(new Distillation{*run.teacher, tc.distill_alpha, tc.distill_temperature});
    ctx.distillation = distillation.get();
  }
  StepLog log(run, progress, metrics, eval_batch, tape);  // starts the clock
  RunResult result;

  StopOnSignal signals;  // Ctrl-C / SIGTERM: finish the step, checkpoint, exit; a second kills
  for (int64_t step = progress.step; step < tc.steps; ++step) {
    const StepStats s = train_step(ctx, step);
    log.count(step + 1, s);
    if (run.options.after_step && !run.options.after_step(progress.step, run.model)) {
      result.end = RunEnd::interrupted;  // as if killed: no log row, no checkpoint
      break;
    }
    const bool last = progress.step == tc.steps;
    // A signal reaches the ranks at different moments: they agree to stop after the same step.
    const bool stopping = dist::any_rank(stop_signal() != 0);
    dist::together([&] {
      if (run.writer) log.record(s, last, stopping, result);
    });
    if (stopping) {
      if (!run.options.quiet && run.writer)
        std::fprintf(stderr, "%sstopped by a signal at step %lld; resume with --resume auto\n", log.tty() ? "\n" : "",
                     static_cast<long long>(progress.step));
      result.end = RunEnd::interrupted;
      break;
    }
  }
  summarize(result, run, log, progress, batches);
  return result;
}

}  // namespace

RunResult run_training(const Config& given, const RunOptions& options) {
  const RunInputs in = check_inputs(given, options);
  Model<float> model(in.spec);
  model.params().init(static_cast<uint64_t>(in.config.train.seed));
  std::unique_ptr<Optimizer<float>> optimizer = make_optimizer(in.config, model.params());
  const bool writer = dist::rank() == 0;
  const Run run{in.config, options, *in.dataset, model, *optimizer, in.teacher.get(), options.out_dir, writer};

  const RunFolder folder = claim_run_folder(run);
  RunStart start = start_run(run, folder.resume_path);
  return train_steps(run, start.progress, start.metrics.get());
}

std::string closing_line(const RunResult& r, int64_t eval_batches) {
  char buf[160];
  std::string line;
  const auto add = [&](const char* format, auto... values) {
    std::snprintf(buf, sizeof buf, format, values...);
    line += buf;
  };
  if (r.end == RunEnd::finished && r.steps_trained == 0) {
    add("already finished at step %lld of %lld: nothing to train", static_cast<long long>(r.step),
        static_cast<long long>(r.total_steps));
    if (r.best_val_loss) add(" (best val loss %.4f; metrics.csv holds its rows)", *r.best_val_loss);
    return line;
  }
  add("%s at step %lld of %lld: ", r.end == RunEnd::finished ? "finished" : "stopped", static_cast<long long>(r.step),
      static_cast<long long>(r.total_steps));
  if (r.train_loss)
    add("train loss %.4f (mean of steps %lld-%lld)", *r.train_loss, static_cast<long long>(r.train_loss_from),
        static_cast<long long>(r.train_loss_to));
  else
    line += "no metrics row written";
  if (r.val_loss)
    add(", val loss %.4f (step %lld, %lld batches of val)", *r.val_loss, static_cast<long long>(r.val_step),
        static_cast<long long>(eval_batches));
  if (r.val_bleu) add(", val BLEU %.2f (greedy)", *r.val_bleu);
  if (!r.val_loss) line += ", no validation yet";
  if (r.best_val_loss && (!r.val_loss || *r.best_val_loss < *r.val_loss)) add(", best %.4f", *r.best_val_loss);
  add("; %.0f tokens/s, %.1f s", r.tokens_per_s, r.elapsed_s);
  return line;
}

}  // namespace headlab
