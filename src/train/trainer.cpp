#include "headlab/common/files.h"
#include "headlab/common/timing.h"
#include "headlab/train/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/common/signals.h"
#include "headlab/data/text.h"
#include "headlab/dist/dist.h"
#include "headlab/io/csv.h"
#include "headlab/io/provenance.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/evaluate.h"
#include "headlab/train/run_folder.h"
#include "headlab/train/setup.h"
#include "headlab/train/step.h"

namespace headlab {

const char* const kMetricsHeader =
    "step,tokens,lr,train_loss,val_loss,val_accuracy,val_bpb,grad_norm,tokens_per_s,elapsed_s";

namespace fs = std::filesystem;

namespace {

// metrics.csv on resume: keep the header and the rows up to `step`, drop the rest (they are
// replayed), so the file ends as if the run had never stopped.
void truncate_metrics(const fs::path& path, int64_t step) {
  HEADLAB_CHECK(fs::is_regular_file(path), "cannot resume: " << path.string() << " is missing");
  const CsvTable table = read_csv(path, "headlab metrics file");
  std::string kept = csv_line(table.header);
  HEADLAB_CHECK(kept == std::string(kMetricsHeader) + "\n", path.string()
                                                                << ": unexpected header, not a headlab metrics file");
  const size_t step_column = table.column("step");
  for (size_t r = 0; r < table.rows.size(); ++r) {
    const std::string& text = table.rows[r][step_column];
    char* end = nullptr;
    const long long row_step = std::strtoll(text.c_str(), &end, 10);
    HEADLAB_CHECK(!text.empty() && *end == '\0' && row_step >= 0, "cannot resume: " << path.string() << ":"
                                                                                    << table.lines[r] << ": step '"
                                                                                    << text << "' is not a step count");
    if (row_step > step) break;
    kept += csv_line(table.rows[r]);
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

namespace {
// The run's config: the given one, with the model section of the init_from checkpoint if any,
// and a text corpus's path that holds from any working directory (the run folder may move).
Config run_config(const Config& given, const RunOptions& options) {
  Config config = given;
  if (!options.init_from.empty()) config.model = checkpoint_config(options.init_from).model;
  if (config.data.task == "text") config.data.path = portable_text_path(config.data.path);
  validate(config);
  return config;
}
}  // namespace

RunResult run_training(const Config& given, const RunOptions& options) {
  // Under mpirun every rank runs this function: each builds the model, reads the checkpoint and
  // trains its share of every step; rank 0 alone locks the folder, evaluates and writes
  // config.toml, metrics.csv and checkpoints (the other ranks' logging counters go unused). Each stage ends in
  // dist::together, so a failure on any rank is one error on all of them, never a rank left waiting.
  const bool writer = dist::rank() == 0;
  Config config;
  ModelSpec spec;
  std::unique_ptr<Dataset> dataset;
  // Everything that can fail on bad input happens before anything is written.
  dist::together([&] {
    config = run_config(given, options);
    HEADLAB_CHECK(!options.out_dir.empty(), "train: no output directory given");
    micro_batches_of_rank(config.train.grad_accum, dist::rank(), dist::size());  // the split is valid
    set_num_threads(resolved_threads(config));
    spec = model_spec(config);
    dataset = make_dataset(config);
  });
  const fs::path dir = options.out_dir, ckpt_dir = dir / "checkpoints", metrics_path = dir / "metrics.csv";
  const TrainConfig& tc = config.train;
  Model<float> model(spec);
  model.params().init(static_cast<uint64_t>(tc.seed));
  std::unique_ptr<Optimizer<float>> optimizer = make_optimizer(config, model.params());

  std::unique_ptr<FileLock> lock;
  std::string resume_path;
  dist::together([&] {
    if (!writer) return;
    // One process per run folder: a second `train --out` of it (a rerun sweep while the killed
    // one's runs still stop) would interleave checkpoints and metrics.
    fs::create_directories(dir);
    lock = std::make_unique<FileLock>(dir / ".lock", "run folder " + dir.string());
    if (options.resume == "auto") {
      if (auto newest = newest_checkpoint(dir.string()))
        resume_path = newest->path;
      else if (!options.quiet)
        std::fprintf(stderr, "no run in %s: starting a new run\n", dir.string().c_str());
    } else if (!options.resume.empty()) {
      resume_path = options.resume;
    } else {
      HEADLAB_CHECK(list_checkpoints(dir.string()).empty() && !fs::exists(metrics_path),
                    dir.string() << " already holds a run; use --resume auto to continue it or --out for a new one");
    }
  });
  resume_path = dist::broadcast(resume_path);  // every rank starts from the checkpoint rank 0 chose
  RunProgress progress;
  std::FILE* metrics = nullptr;
  dist::together([&] {
    if (!resume_path.empty()) {
      const Config saved = checkpoint_config(resume_path);
      HEADLAB_CHECK(saved.model == config.model,
                    resume_path << ": trained with a different model section than this config (compare "
                                << (dir / "config.toml").string() << ")");
      progress = load_training_checkpoint(resume_path, model, optimizer.get());
      HEADLAB_CHECK(progress.step <= tc.steps,
                    resume_path << ": at step " << progress.step << ", beyond train.steps = " << tc.steps);
      if (!options.quiet && writer)
        std::fprintf(stderr, "resuming %s at step %lld (%s)\n", dir.string().c_str(),
                     static_cast<long long>(progress.step), resume_path.c_str());
    }
    if (resume_path.empty() && !options.init_from.empty()) {
      load_training_checkpoint(options.init_from, model, nullptr);  // the run itself starts at step 0
      // The moments continue where they match: fresh ones would first undo the trained model.
      const bool continued = continue_optimizer_state(options.init_from, *optimizer);
      if (!options.quiet && writer)
        std::fprintf(stderr, "initializing from %s (its model section replaces the config's): weights and %s\n",
                     options.init_from.c_str(),
                     continued ? "optimizer state" : "fresh optimizer moments (it holds no state for this model)");
    }
    if (!writer) return;
    fs::create_directories(ckpt_dir);
    // Headed by the build that wrote it (on resume, the resuming build; each checkpoint has its own).
    write_file_atomically(dir / "config.toml", provenance_comment() + to_toml(config));
    if (resume_path.empty())
      write_file_atomically(metrics_path, std::string(kMetricsHeader) + "\n");
    else
      truncate_metrics(metrics_path, progress.step);
    metrics = std::fopen(metrics_path.c_str(), "a");
    HEADLAB_CHECK(metrics != nullptr, "cannot append to " << metrics_path.string());
  });
  struct FileCloser {
    std::FILE* f;
    ~FileCloser() {
      if (f) std::fclose(f);
    }
  } metrics_closer{metrics};

  Arena arena;
  Tape<float> tape(arena);
  Batch eval_batch = dataset->make_batch(tc.batch_size);
  BatchPrefetcher batches(*dataset, Split::train, tc.batch_size, tc.prefetch);
  TrainingContext ctx{model,
                      *optimizer,
                      batches,
                      tape,
                      schedule_options(config),
                      tc.grad_accum,
                      tc.grad_clip,
                      static_cast<uint64_t>(tc.seed)};

  const bool tty = !options.quiet && isatty(STDERR_FILENO);
  const double start = wall_seconds(), elapsed_before = progress.elapsed_s;
  const int64_t first_step = progress.step;
  double window_start = start;
  int64_t window_tokens = 0, run_tokens = 0;
  std::string last_best_path;
  RunResult result;
  auto checkpoint = [&](const std::string& path) {
    progress.elapsed_s = elapsed_before + wall_seconds() - start;
    save_training_checkpoint(path, config, model, optimizer.get(), progress);
  };

  StopOnSignal signals;  // Ctrl-C / SIGTERM: finish the step, checkpoint, exit; a second kills
  for (int64_t step = progress.step; step < tc.steps; ++step) {
    const StepStats s = train_step(ctx, step);
    progress.step = step + 1;
    progress.log_loss_sum += s.loss;
    ++progress.log_loss_steps;
    progress.tokens_seen += s.tokens;
    window_tokens += s.tokens;
    run_tokens += s.tokens;
    result.final_train_loss = s.loss;
    if (options.after_step && !options.after_step(progress.step, model)) {
      result.end = RunEnd::interrupted;  // as if killed: no log row, no checkpoint
      break;
    }

    const bool last = progress.step == tc.steps;
    // A signal reaches the ranks at different moments: they agree to stop after the same step.
    const bool stopping = dist::any_rank(stop_signal() != 0);
    dist::together([&] {
      if (!writer) return;
      const bool eval_now = last || (tc.eval_every > 0 && progress.step % tc.eval_every == 0);
      EvalStats e;
      if (eval_now) {
        e = evaluate(model, *dataset, Split::val, tc.eval_batches, eval_batch, tape);
        result.final_val_loss = e.loss;
      }
      if (eval_now || last || progress.step % tc.log_every == 0) {
        const double t = wall_seconds(), rate = window_tokens / std::max(t - window_start, 1e-9);
        const double train_loss = progress.log_loss_sum / progress.log_loss_steps;
        const std::string row = csv_line(
            {std::to_string(progress.step), std::to_string(progress.tokens_seen), csv_number("%.6g", s.lr),
             csv_number("%.6g", train_loss), format_optional(e.loss, eval_now),
             format_optional(e.accuracy, eval_now && e.accuracy >= 0),
             format_optional(e.bits_per_byte, eval_now && e.bits_per_byte >= 0), csv_number("%.6g", s.grad_norm),
             csv_number("%.1f", rate), csv_number("%.2f", elapsed_before + t - start)});
        std::fputs(row.c_str(), metrics);
        HEADLAB_CHECK(std::fflush(metrics) == 0, "cannot write " << metrics_path.string() << " (disk full?)");
        if (!options.quiet) {
          const double eta = (tc.steps - progress.step) * (t - start) / (progress.step - first_step);
          char line[256];
          std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f%s  %.0f tok/s  ETA %s",
                        static_cast<long long>(progress.step), static_cast<long long>(tc.steps), train_loss,
                        eval_now ? ("  val " + format_optional(e.loss, true)).c_str() : "", rate,
                        format_duration(eta).c_str());
          if (tty)
            std::fprintf(stderr, "\r\033[K%s%s", line, eval_now ? "\n" : "");
          else
            std::fprintf(stderr, "%s\n", line);
        }
        progress.log_loss_sum = 0;
        progress.log_loss_steps = 0;
        window_tokens = 0;
        window_start = t;
      }
      if (eval_now && (!progress.has_best || e.loss < progress.best_val_loss)) {
        progress.has_best = true;
        progress.best_val_loss = e.loss;
        checkpoint(best_checkpoint_path(dir.string()));
      }
      if (last || stopping || (tc.checkpoint_every > 0 && progress.step % tc.checkpoint_every == 0)) {
        checkpoint(checkpoint_path(dir.string(), progress.step));
        if (tc.keep_checkpoints > 0) prune_checkpoints(dir.string(), static_cast<int>(tc.keep_checkpoints), "");
      }
    });
    if (stopping) {
      if (!options.quiet && writer)
        std::fprintf(stderr, "%sstopped by a signal at step %lld; resume with --resume auto\n", tty ? "\n" : "",
                     static_cast<long long>(progress.step));
      result.end = RunEnd::interrupted;
      break;
    }
  }
  result.step = progress.step;
  result.elapsed_s = wall_seconds() - start;
  result.tokens_per_s = run_tokens / std::max(result.elapsed_s, 1e-9);
  if (tc.prefetch) {
    const BatchPrefetcher::Stats d = batches.stats();
    result.batches = d.batches;
    result.batches_ready = d.ready;
    result.data_wait_s = d.wait_s;
    if (!options.quiet && d.batches > 1)
      std::fprintf(stderr,
                   "data: %lld of %lld training batches were ready when their step began; %.3f ms waited in all\n",
                   static_cast<long long>(d.ready), static_cast<long long>(d.batches), 1e3 * d.wait_s);
  }
  return result;
}

}  // namespace headlab
