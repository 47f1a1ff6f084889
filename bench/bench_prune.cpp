// Inference speed of a physically pruned model against the full one (Michel et al. 2019 report
// +17.5% examples/s for BERT at batch 16 with half the heads removed). Builds a BERT-like model
// (default: encoder, d_model 256, 4 layers, 8 heads of 32, MLP 1024, T 128, byte vocabulary),
// removes half the heads of every layer with prune_heads (which heads does not matter for speed:
// a layer's cost is linear in its head count) and times forward passes without grad (eval mode,
// the tape recording nothing), alternating full and pruned rep by rep at each batch size so both
// see the same machine state. Prints per batch size the median and minimum wall ms per forward,
// examples/s from the medians and the ratio pruned / full, plus the forward flop ratio.
// unit says what half is removed: heads (half of every layer's), ffn (half of every block's
// units), layers (every other attention layer whole) or blocks (every other FFN block whole).
//   OMP_WAIT_POLICY=passive ./build/bench_prune [reps=15] [threads=2] [kind=encoder] [T=128] [batches=1,4,16,64]
//                                               [unit=heads]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/common/timing.h"
#include "headlab/linalg/gemm.h"
#include "headlab/nn/prune.h"

using namespace headlab;

namespace {

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

// One forward without grad on fixed tokens; returns wall seconds.
double time_forward(Model<float>& model, Tape<float>& tape, const ModelInput& input) {
  const double start = wall_seconds();
  {
    NoGradGuard<float> no_grad(tape);
    model.forward(tape, input, {});
  }
  const double elapsed = wall_seconds() - start;
  tape.reset();
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const std::string kind = argc > 3 ? argv[3] : "encoder";
  const int64_t T = argc > 4 ? std::atoll(argv[4]) : 128;
  const std::vector<int64_t> batches = parse_list(argc > 5 ? argv[5] : "1,4,16,64");
  const std::string unit = argc > 6 ? argv[6] : "heads";
  if (unit != "heads" && unit != "ffn" && unit != "layers" && unit != "blocks") {
    std::fprintf(stderr, "bench_prune: unit must be heads, ffn, layers or blocks, got '%s'\n", unit.c_str());
    return 2;
  }
  set_num_threads(threads);

  ModelSpec spec;
  spec.kind = kind == "decoder" ? ModelKind::decoder : ModelKind::encoder;
  spec.vocab_size = 256;
  spec.d_model = 256;
  spec.n_heads = spec.n_kv_heads = 8;
  spec.d_head = 32;
  spec.n_layers = 4;
  spec.d_mlp = 1024;
  spec.max_seq_len = T;
  spec.n_classes = 2;
  Model<float> full(spec);
  full.params().init(1);
  HeadKeepMask keep(static_cast<size_t>(spec.n_layers));
  UnitKeepMask keep_units(static_cast<size_t>(spec.n_layers));
  for (int64_t l = 0; l < spec.n_layers; ++l) {
    for (int64_t h = 0; h < spec.n_heads; ++h)  // half, differently per layer; or every other layer whole
      keep[l].push_back(unit == "heads" ? (h + l) % 2 == 0 : unit != "layers" || l % 2 == 0);
    for (int64_t f = 0; f < spec.d_mlp; ++f)
      keep_units[l].push_back(unit == "ffn" ? (f + l) % 2 == 0 : unit != "blocks" || l % 2 == 0);
  }
  Model<float> pruned = prune_units(prune_heads(full, keep), keep_units);
  int64_t units = 0;
  for (int64_t b = 0; b < pruned.spec().mlp_blocks(); ++b) units += pruned.spec().units_at_block(b);

  std::printf(
      "bench_prune: %s d_model %lld, %lld layers, %lld -> %lld heads in all (d_head %lld), mlp %lld -> %lld units "
      "in all (%s removed), T %lld, %d threads, blis %s, %d reps (alternated)\n",
      kind.c_str(), (long long)spec.d_model, (long long)spec.n_layers, (long long)spec.total_heads(),
      (long long)pruned.spec().total_heads(), (long long)spec.d_head, (long long)(spec.d_mlp * spec.n_layers),
      (long long)units, unit.c_str(), (long long)T, num_threads(), blis_kernel_name().c_str(), reps);
  std::printf("parameters %lld -> %lld; forward flops/token ratio pruned/full %.3f\n", (long long)full.params().count(),
              (long long)pruned.params().count(), pruned.forward_flops_per_token(T) / full.forward_flops_per_token(T));
  std::printf("%6s %12s %12s %12s %12s %14s %14s %8s\n", "batch", "full_med_ms", "full_min_ms", "pruned_med_ms",
              "pruned_min_ms", "full_ex_per_s", "pruned_ex_per_s", "speedup");
  Arena arena;
  Tape<float> tape(arena);
  for (int64_t B : batches) {
    std::vector<int32_t> tokens(static_cast<size_t>(B * T));
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 11) % 256);
    ModelInput input{B, T, tokens.data(), nullptr, nullptr};
    for (int w = 0; w < 2; ++w) {  // warm-up: arena sizes, caches
      time_forward(full, tape, input);
      time_forward(pruned, tape, input);
    }
    std::vector<double> t_full, t_pruned;
    for (int r = 0; r < reps; ++r) {
      // Alternate which goes first, so neither always follows the other's cache state.
      if (r % 2 == 0) {
        t_full.push_back(time_forward(full, tape, input));
        t_pruned.push_back(time_forward(pruned, tape, input));
      } else {
        t_pruned.push_back(time_forward(pruned, tape, input));
        t_full.push_back(time_forward(full, tape, input));
      }
    }
    const double mf = median(t_full), mp = median(t_pruned);
    std::printf("%6lld %12.2f %12.2f %12.2f %12.2f %14.1f %14.1f %8.3f\n", (long long)B, 1e3 * mf,
                1e3 * *std::min_element(t_full.begin(), t_full.end()), 1e3 * mp,
                1e3 * *std::min_element(t_pruned.begin(), t_pruned.end()), B / mf, B / mp, mf / mp);
  }
  return 0;
}
