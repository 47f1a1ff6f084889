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
// An encoder_decoder config trains on random source rows of --source-len S tokens (default T) and
// target rows of T tokens, unpadded, with the config's label smoothing; tokens_per_s counts target
// tokens (fairseq's words per second), source_tokens_per_s the source side; flops_per_token is
// null there (the formula is the decoder's).
// --decode times decoding instead (bench_decode.cpp): --beam, --sentences, --source-len,
// --target-len, --no-cache, --reps, --warmup, --cross-heads-removed K (the full model, K cross
// heads per decoder layer masked, and removed, timed alternately).
// --gemm instead times one M = K = N sgemm through headlab::gemm (BLIS, `threads` threads), the
// "what BLIS can do" reference of the speed targets.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
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
#include "bench_decode.h"
#include "bench_machine.h"
#include "options.h"
#include "verbs.h"

namespace headlab::cli {

namespace {

// Uniform random tokens in [0, vocab): row r of batch i is RowRng(seed, split, i, r), T + 1
// draws; tokens = draws[0:T], targets = draws[1:T+1]; with a source side (source_len > 0), S more
// draws are the source row, all real tokens. Never allocates after make_batch.
class RandomTokens final : public Dataset {
 public:
  RandomTokens(int64_t vocab, int64_t seq_len, int64_t source_len, uint64_t seed)
      : vocab_(vocab), seq_len_(seq_len), source_len_(source_len), seed_(seed) {}
  std::string name() const override { return "random"; }
  int64_t vocab_size() const override { return vocab_; }
  int64_t seq_len() const override { return seq_len_; }
  BatchLayout batch_layout() const override { return {.source = source_len_ > 0}; }
  BatchShape batch_capacity(int64_t batch_size) const override { return {batch_size, seq_len_, source_len_}; }
  void fill_batch(Split split, int64_t batch_index, Batch& out) const override {
    out.check_shape("random tokens", seq_len_);
    for (int64_t r = 0; r < out.batch_size; ++r) {
      RowRng rng(seed_, split, batch_index, r);
      int32_t* tokens = out.tokens.data() + r * seq_len_;
      int32_t* targets = out.targets.data() + r * seq_len_;
      int32_t prev = draw(rng);
      for (int64_t t = 0; t < seq_len_; ++t) {
        const int32_t next = draw(rng);
        tokens[t] = prev;
        targets[t] = next;
        prev = next;
      }
      for (int64_t s = 0; s < source_len_; ++s) {
        out.source_tokens[static_cast<size_t>(r * source_len_ + s)] = draw(rng);
        out.source_padding[static_cast<size_t>(r * source_len_ + s)] = 1;
      }
    }
  }

 private:
  int32_t draw(RowRng& rng) const { return static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab_))); }
  int64_t vocab_, seq_len_, source_len_;
  uint64_t seed_;
};

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
      "reps", "--gemm: timed repetitions (default 10); --decode: timed decodings (default 3)", cxxopts::value<int>())(
      "decode", "time decoding of an encoder_decoder instead of training (random weights and sources)")(
      "beam", "--decode: beam size (1 = greedy)", cxxopts::value<int>()->default_value("5"))(
      "sentences", "--decode: sentences decoded side by side", cxxopts::value<int>()->default_value("32"))(
      "source-len", "source tokens per row (--decode, default 64; training an encoder_decoder, default T)",
      cxxopts::value<int>())("target-len", "--decode: target tokens per sentence, </s> included",
                             cxxopts::value<int>()->default_value("128"))(
      "no-cache", "--decode: no KV cache, every step runs the whole model on the prefix")(
      "cross-heads-removed",
      "--decode: also time the model with the last K cross-attention heads of every decoder layer masked (gates 0) "
      "and removed, alternating, with the sentences/s ratios",
      cxxopts::value<int>())("h,help", "show this help");
  const auto parsed = parse_options(options, {"config"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  const std::optional<int> threads_arg = count_option<int>(args, "threads", 1);
  if (args.count("gemm")) {
    return run_gemm(*count_option<int>(args, "size", 1), count_option<int>(args, "reps", 1).value_or(10),
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
  const std::optional<int> source_len_arg = count_option<int>(args, "source-len", 1);
  if (args.count("decode")) {
    DecodeBenchOptions decode;
    decode.beam = *count_option<int>(args, "beam", 1);
    decode.sentences = *count_option<int>(args, "sentences", 1);
    decode.source_len = source_len_arg.value_or(64);
    decode.target_len = *count_option<int>(args, "target-len", 1);
    decode.use_cache = !args.count("no-cache");
    decode.reps = count_option<int>(args, "reps", 1).value_or(3);
    decode.warmup = args.count("warmup") ? warmup : 1;
    decode.tag = args["tag"].as<std::string>();
    decode.cross_heads_removed = count_option<int>(args, "cross-heads-removed", 1).value_or(0);
    return run_decode_bench(config, decode);
  }
  const TrainConfig& tc = config.train;
  HEADLAB_CHECK(model_kind_named(config.model.kind).lm_head,
                "bench: model.kind must be decoder or encoder_decoder (next-token loss on random tokens)");

  const int threads = resolved_threads(config);
  set_num_threads(threads);
  const ModelSpec spec = model_spec(config);
  Model<float> model(spec);
  model.params().init(static_cast<uint64_t>(tc.seed));
  std::unique_ptr<Optimizer<float>> optimizer = make_optimizer(config, model.params());
  const bool has_source = model_kind_info(spec.kind).source;
  const int64_t S = has_source ? source_len_arg.value_or(config.data.seq_len) : 0;
  HEADLAB_CHECK(S <= spec.max_seq_len,
                "bench: --source-len " << S << " exceeds model.max_seq_len=" << spec.max_seq_len);
  RandomTokens dataset(spec.vocab_size, config.data.seq_len, S, static_cast<uint64_t>(config.data.seed));
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
  MachineSample start;
  int64_t allocs0 = 0;
  long minflt0 = 0;
  const std::string load_start = loadavg();
  for (int i = 0; i < warmup + steps; ++i) {
    if (i == warmup) {
      allocs0 = tensor_system_allocations();
      minflt0 = minor_page_faults();
      start = MachineSample::now();
    }
    const double t0 = wall_seconds();
    const StepStats s = train_step(ctx, i);
    const double t1 = wall_seconds();
    losses.push_back(s.loss);
    if (i >= warmup) times.push_back(t1 - t0);
  }
  const MachineSample end = MachineSample::now();
  const int64_t allocs = tensor_system_allocations() - allocs0;
  const long minflt = minor_page_faults() - minflt0;

  // --phases: `steps` more steps of train_step with its phase clock on (StepPhases). Not the
  // headline measurement (that is train_step without the clock, above); this only splits a step.
  JsonObject phases_json;
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
    for (size_t k = 0; k < std::size(parts); ++k) phases_json.raw(parts[k].first, json_fixed(median(ph[k]) * 1e3, 3));
  }

  const double med = median(times);
  std::vector<std::string> all;
  for (double t : times) all.push_back(json_fixed(t * 1e3, 3));
  JsonObject config_json;
  config_json.integer("d_model", spec.d_model).integer("n_layers", spec.n_layers);
  if (has_source) config_json.integer("n_encoder_layers", spec.n_encoder_layers);
  config_json.integer("n_heads", spec.n_heads).integer("n_kv_heads", spec.n_kv_heads).integer("seq", T);
  if (has_source) config_json.integer("source_len", S);
  config_json.integer("batch", tc.batch_size)
      .integer("grad_accum", tc.grad_accum)
      .integer("threads", threads)
      .integer("steps", steps)
      .integer("warmup", warmup);
  JsonObject json;
  json.raw("config", config_json.str())
      .text("mode", has_source ? "train_seq2seq" : "train")
      .text("tag", args["tag"].as<std::string>())
      .text("headlab", provenance_value("headlab_version"))
      .text("headlab_commit", provenance_value("headlab_commit"))
      .integer("threads", threads)
      .text("blis_kernels", blis_kernel_name())
      .integer("params", n_params)
      .integer("params_nonembedding", n_nonemb)
      .raw("flops_per_token", has_source ? "null" : json_fixed(flops_per_token, 0))
      .text("flops_formula", "6*N_nonemb + 12*n_layers*d_model*T (N_nonemb = all params except tok_emb, pos_emb)")
      .raw("step_ms_median", json_fixed(med * 1e3, 3))
      .raw("step_ms_min", json_fixed(*std::min_element(times.begin(), times.end()) * 1e3, 3))
      .raw("step_ms_max", json_fixed(*std::max_element(times.begin(), times.end()) * 1e3, 3))
      .raw("step_ms_all", json_list(all))
      .raw("tokens_per_s", json_fixed(tokens_per_step / med, 1));
  if (has_source)
    json.raw("source_tokens_per_s", json_fixed(static_cast<double>(tc.batch_size * S * tc.grad_accum) / med, 1));
  json.raw("gflops", has_source ? "null" : json_fixed(flops_per_token * tokens_per_step / med * 1e-9, 2))
      .raw("peak_rss_mb", json_fixed(peak_rss_mb(), 1))
      .raw("loss_first", json_fixed(losses.front(), 4))
      .raw("loss_last", json_fixed(losses.back(), 4))
      .raw("allocations_per_step", json_fixed(static_cast<double>(allocs) / steps, 2))
      .integer("minflt_per_step", std::lround(static_cast<double>(minflt) / steps))
      .raw("arena_mb", json_fixed(arena.capacity() / 1048576.0, 1))
      .raw("loadavg_start", load_start);
  add_machine_use(json, start, end);
  json.raw("grad_clip", json_number(tc.grad_clip)).raw("label_smoothing", json_number(tc.label_smoothing));
  if (args.count("phases")) json.raw("phase_ms_median", phases_json.str());
  std::printf("%s\n", json.str().c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace headlab::cli
