// headlab bench CONFIG [--set k=v]... [--steps N] [--warmup N] [--threads N] [--seq T] [--batch B]
// headlab bench --gemm [--size N] [--reps R] [--threads N]
//
// Training speed on random tokens, printed as ONE JSON line with the keys of the PyTorch reference
// (bench/torch_ref.py): step_ms_median/min/max, tokens_per_s, flops_per_token,
// gflops, peak_rss_mb, params, plus headlab's own (blis_kernels, threads,
// allocations_per_step, minflt_per_step, ...). Every timed step is exactly train_step(): zero
// grads, forward, backward, clip (norm only when train.grad_clip = 0), AdamW; the data comes from
// an in-memory dataset of uniform random tokens (no file), a pure function of (data.seed, step).
//   flops_per_token = 6 * N_nonemb + 12 * n_layers * d_model * T   (torch_ref's formula:
//   N_nonemb = every trained parameter except the token and position embeddings)
// --seq T sets data.seq_len and model.max_seq_len together (torch_ref's --seq: its position
// table has exactly T rows, so the parameter counts match); --batch B sets train.batch_size.
// --gemm instead times one M = K = N sgemm through headlab::gemm (BLIS, `threads` threads), the
// "what BLIS can do" reference of the speed targets.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/common/error.h"
#include "headlab/common/parallel.h"
#include "headlab/common/timing.h"
#include "headlab/data/batch.h"
#include "headlab/io/config.h"
#include "headlab/io/json.h"
#include "headlab/io/provenance.h"
#include "headlab/linalg/gemm.h"
#include "headlab/tensor/arena.h"
#include "headlab/train/setup.h"
#include "headlab/train/step.h"
#include "options.h"
#include "verbs.h"

namespace headlab::cli {

namespace {

// Uniform random tokens in [0, vocab): row r of batch i is RowRng(seed, split, i, r), T + 1
// draws; tokens = draws[0:T], targets = draws[1:T+1]. Never allocates after make_batch.
class RandomTokens final : public Dataset {
 public:
  RandomTokens(int64_t vocab, int64_t seq_len, uint64_t seed) : vocab_(vocab), seq_len_(seq_len), seed_(seed) {}
  std::string name() const override { return "random"; }
  int64_t vocab_size() const override { return vocab_; }
  int64_t seq_len() const override { return seq_len_; }
  void fill_batch(Split split, int64_t batch_index, Batch& out) const override {
    out.check_shape("random tokens", seq_len_);
    for (int64_t r = 0; r < out.batch_size; ++r) {
      RowRng rng(seed_, split, batch_index, r);
      int32_t* tokens = out.tokens.data() + r * seq_len_;
      int32_t* targets = out.targets.data() + r * seq_len_;
      int32_t prev = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab_)));
      for (int64_t t = 0; t < seq_len_; ++t) {
        const int32_t next = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab_)));
        tokens[t] = prev;
        targets[t] = next;
        prev = next;
      }
    }
  }

 private:
  int64_t vocab_, seq_len_;
  uint64_t seed_;
};

// Machine-wide busy and steal CPU seconds from /proc/stat (as torch_ref.py computes them).
void cpu_busy_seconds(double& busy, double& steal) {
  busy = steal = 0;
  std::ifstream f("/proc/stat");
  std::string cpu;
  long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, st = 0;
  if (!(f >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> st)) return;
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  busy = static_cast<double>(user + nice + system + irq + softirq) / hz;
  steal = static_cast<double>(st) / hz;
}

double own_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string first;
  f >> first;
  return first.empty() ? "null" : first;
}

int run_gemm(int64_t n, int reps, int threads) {
  set_num_threads(threads);
  Arena arena;
  Tensor<float> a = arena.empty<float>({n, n}), b = arena.empty<float>({n, n}), c = arena.empty<float>({n, n});
  for (int64_t i = 0; i < a.numel(); ++i) {
    a.data()[i] = static_cast<float>((i % 17) - 8) * 0.01f;
    b.data()[i] = static_cast<float>((i % 13) - 6) * 0.01f;
  }
  std::vector<double> times;
  for (int r = 0; r < reps + 2; ++r) {
    const double t0 = wall_seconds();
    gemm(a, b.transpose(0, 1), c, 1.0f, 0.0f);  // x w^T, the orientation of every linear layer
    const double t1 = wall_seconds();
    if (r >= 2) times.push_back(t1 - t0);
  }
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  std::printf(
      "{\"gemm\": [%lld, %lld, %lld], \"threads\": %d, \"blis_kernels\": %s, \"reps\": %d, "
      "\"ms_median\": %s, \"gflops\": %s, \"gflops_best\": %s}\n",
      (long long)n, (long long)n, (long long)n, threads, json_string(blis_kernel_name()).c_str(), reps,
      json_fixed(median(times) * 1e3, 3).c_str(), json_fixed(flops / median(times) * 1e-9, 2).c_str(),
      json_fixed(flops / *std::min_element(times.begin(), times.end()) * 1e-9, 2).c_str());
  return 0;
}

}  // namespace

int run_bench(int argc, char** argv) {
  cxxopts::Options options("headlab bench",
                           "Training speed on random tokens (one JSON line, torch_ref.py's keys), or --gemm.");
  options.positional_help("CONFIG");
  options.add_options()("config", "config file (configs/bench.toml is the PyTorch reference model)",
                        cxxopts::value<std::string>())(
      "set", "override a config key, e.g. --set model.n_heads=8 (repeatable)",
      cxxopts::value<std::vector<std::string>>())("steps", "timed steps", cxxopts::value<int>()->default_value("20"))(
      "warmup", "untimed warm-up steps before them", cxxopts::value<int>()->default_value("3"))(
      "threads", "threads (default: train.threads, 0 there = all cores / OMP_NUM_THREADS)", cxxopts::value<int>())(
      "seq", "sequence length T: sets data.seq_len and model.max_seq_len (like torch_ref --seq)",
      cxxopts::value<int>())("batch", "sequences per step: sets train.batch_size (like torch_ref --batch)",
                             cxxopts::value<int>())("tag", "free-form label copied into the JSON line",
                                                    cxxopts::value<std::string>()->default_value(""))(
      "phases",
      "after the timed steps, time --steps more split into train_step's phases (data, forward, "
      "backward, tape reset, gradient sum, clip, optimizer)")(
      "gemm", "time an N x N x N sgemm through headlab::gemm instead of training")(
      "size", "--gemm: N", cxxopts::value<int>()->default_value("2048"))(
      "reps", "--gemm: timed repetitions", cxxopts::value<int>()->default_value("10"))("h,help", "show this help");
  const auto parsed = parse_options(options, {"config"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  const std::optional<int> threads_arg = count_option<int>(args, "threads", 1);
  if (args.count("gemm")) {
    return run_gemm(*count_option<int>(args, "size", 1), *count_option<int>(args, "reps", 1),
                    threads_arg ? *threads_arg : num_threads());
  }
  HEADLAB_CHECK(args.count("config"),
                "no config file given (usage: headlab bench CONFIG [--set k=v]... "
                "[--steps N] [--warmup N])");
  const int steps = *count_option<int>(args, "steps", 1), warmup = *count_option<int>(args, "warmup", 0);
  std::vector<std::string> sets = list_option(args, "set");
  if (const auto seq = count_option<int>(args, "seq", 1)) {
    sets.push_back("data.seq_len=" + std::to_string(*seq));
    sets.push_back("model.max_seq_len=" + std::to_string(*seq));
  }
  if (const auto batch = count_option<int>(args, "batch", 1))
    sets.push_back("train.batch_size=" + std::to_string(*batch));
  if (threads_arg) sets.push_back("train.threads=" + std::to_string(*threads_arg));
  const Config config = load_config(args["config"].as<std::string>(), sets);
  const TrainConfig& tc = config.train;
  HEADLAB_CHECK(model_kind_named(config.model.kind).lm_head,
                "bench: model.kind must be decoder (next-token loss on random tokens)");

  const int threads = resolved_threads(config);
  set_num_threads(threads);
  const ModelSpec spec = model_spec(config);
  Model<float> model(spec);
  model.params().init(static_cast<uint64_t>(tc.seed));
  std::unique_ptr<Optimizer<float>> optimizer = make_optimizer(config, model.params());
  RandomTokens dataset(spec.vocab_size, config.data.seq_len, static_cast<uint64_t>(config.data.seed));
  Arena arena;
  Tape<float> tape(arena);
  BatchPrefetcher batches(dataset, Split::train, tc.batch_size, tc.prefetch);
  ScheduleOptions schedule = schedule_options(config);
  schedule.total_steps = std::max<int64_t>(schedule.total_steps, warmup + steps);
  schedule.warmup_steps = std::min(schedule.warmup_steps, schedule.total_steps);
  TrainingContext ctx{model,    *optimizer,    batches,      tape,
                      schedule, tc.grad_accum, tc.grad_clip, static_cast<uint64_t>(tc.seed)};
  ctx.label_smoothing = tc.label_smoothing;

  // Parameter counts as torch_ref counts them (head gates are not trained: not counted).
  const int64_t n_params = model.params().count();
  int64_t n_emb = 0;
  for (const ParamSpec& p : model.params().specs())
    if (p.kind == ParamKind::embedding) n_emb += p.shape.numel();
  const int64_t n_nonemb = n_params - n_emb;
  const int64_t T = config.data.seq_len;
  const double flops_per_token =
      6.0 * static_cast<double>(n_nonemb) + 12.0 * static_cast<double>(spec.n_layers * spec.d_model * T);
  const double tokens_per_step = static_cast<double>(tc.batch_size * T * tc.grad_accum);

  std::vector<double> times;
  std::vector<double> losses;
  double busy0 = 0, steal0 = 0, own0 = 0, wall0 = 0;
  int64_t allocs0 = 0;
  long minflt0 = 0;
  const std::string load_start = loadavg();
  for (int i = 0; i < warmup + steps; ++i) {
    if (i == warmup) {
      cpu_busy_seconds(busy0, steal0);
      own0 = own_cpu_seconds();
      allocs0 = tensor_system_allocations();
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      minflt0 = u.ru_minflt;
      wall0 = wall_seconds();
    }
    const double t0 = wall_seconds();
    const StepStats s = train_step(ctx, i);
    const double t1 = wall_seconds();
    losses.push_back(s.loss);
    if (i >= warmup) times.push_back(t1 - t0);
  }
  const double wall = wall_seconds() - wall0;
  double busy1 = 0, steal1 = 0;
  cpu_busy_seconds(busy1, steal1);
  const double own = own_cpu_seconds() - own0;
  const int64_t allocs = tensor_system_allocations() - allocs0;
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const long minflt = u.ru_minflt - minflt0;

  // --phases: `steps` more steps of train_step with its phase clock on (StepPhases). Not the
  // headline measurement (that is train_step without the clock, above); this only splits a step.
  std::string phases_json;
  if (args.count("phases")) {
    const std::pair<const char*, double StepPhases::*> parts[] = {{"data", &StepPhases::data},
                                                                  {"forward", &StepPhases::forward},
                                                                  {"backward", &StepPhases::backward},
                                                                  {"tape_reset", &StepPhases::tape_reset},
                                                                  {"gradient_sum", &StepPhases::gradient_sum},
                                                                  {"clip", &StepPhases::clip},
                                                                  {"optimizer", &StepPhases::optimizer},
                                                                  {"total", &StepPhases::total}};
    std::vector<std::vector<double>> ph(std::size(parts));
    StepPhases phases;
    ctx.phases = &phases;
    for (int i = 0; i < steps; ++i) {
      train_step(ctx, warmup + steps + i);
      for (size_t k = 0; k < std::size(parts); ++k) ph[k].push_back(phases.*parts[k].second);
    }
    ctx.phases = nullptr;
    phases_json = ", \"phase_ms_median\": {";
    for (size_t k = 0; k < std::size(parts); ++k)
      phases_json += std::string(k ? ", " : "") + "\"" + parts[k].first + "\": " + json_fixed(median(ph[k]) * 1e3, 3);
    phases_json += "}";
  }

  const double med = median(times);
  std::string all = "[";
  for (size_t i = 0; i < times.size(); ++i) all += (i ? ", " : "") + json_fixed(times[i] * 1e3, 3);
  all += "]";
  std::ostringstream json;
  json << "{\"config\": {\"d_model\": " << spec.d_model << ", \"n_layers\": " << spec.n_layers
       << ", \"n_heads\": " << spec.n_heads << ", \"n_kv_heads\": " << spec.n_kv_heads << ", \"seq\": " << T
       << ", \"batch\": " << tc.batch_size << ", \"grad_accum\": " << tc.grad_accum << ", \"threads\": " << threads
       << ", \"steps\": " << steps << ", \"warmup\": " << warmup << "}"
       << ", \"tag\": " << json_string(args["tag"].as<std::string>())
       << ", \"headlab\": " << json_string(provenance_value("headlab_version"))
       << ", \"headlab_commit\": " << json_string(provenance_value("headlab_commit")) << ", \"threads\": " << threads
       << ", \"blis_kernels\": " << json_string(blis_kernel_name()) << ", \"params\": " << n_params
       << ", \"params_nonembedding\": " << n_nonemb << ", \"flops_per_token\": " << json_fixed(flops_per_token, 0)
       << ", \"flops_formula\": \"6*N_nonemb + 12*n_layers*d_model*T (N_nonemb = all params except tok_emb, pos_emb)\""
       << ", \"step_ms_median\": " << json_fixed(med * 1e3, 3)
       << ", \"step_ms_min\": " << json_fixed(*std::min_element(times.begin(), times.end()) * 1e3, 3)
       << ", \"step_ms_max\": " << json_fixed(*std::max_element(times.begin(), times.end()) * 1e3, 3)
       << ", \"step_ms_all\": " << all << ", \"tokens_per_s\": " << json_fixed(tokens_per_step / med, 1)
       << ", \"gflops\": " << json_fixed(flops_per_token * tokens_per_step / med * 1e-9, 2)
       << ", \"peak_rss_mb\": " << json_fixed(u.ru_maxrss / 1024.0, 1)
       << ", \"loss_first\": " << json_fixed(losses.front(), 4) << ", \"loss_last\": " << json_fixed(losses.back(), 4)
       << ", \"allocations_per_step\": " << json_fixed(static_cast<double>(allocs) / steps, 2)
       << ", \"minflt_per_step\": " << std::lround(static_cast<double>(minflt) / steps)
       << ", \"arena_mb\": " << json_fixed(arena.capacity() / 1048576.0, 1) << ", \"loadavg_start\": " << load_start
       << ", \"foreign_cores\": " << json_fixed(std::max(0.0, (busy1 - busy0) - own) / wall, 2)
       << ", \"steal_cores\": " << json_fixed((steal1 - steal0) / wall, 2)
       << ", \"own_cores\": " << json_fixed(own / wall, 2) << ", \"grad_clip\": " << json_number(tc.grad_clip)
       << phases_json << "}";
  std::printf("%s\n", json.str().c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace headlab::cli
