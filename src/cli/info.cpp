// headlab info [CHECKPOINT.h5 | RUN | CONFIG.toml] [--keys]: the build (version, commit, threads,
// BLIS kernel set, where the shared files and the user cache are) and, for a checkpoint or config,
// the model: shape, parameter count per component, head gates, and the build that wrote the
// checkpoint. --keys: every config key. headlab version (also --version, -V): the build's lines alone.
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <cxxopts.hpp>

#include "headlab/common/error.h"
#include "headlab/common/parallel.h"
#include "headlab/common/paths.h"
#include "headlab/ops/attention.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/provenance.h"
#include "headlab/linalg/gemm.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"
#include "options.h"
#include "verbs.h"

namespace headlab::cli {

namespace {

// "blocks/3/attn/qkv/weight" -> "attention"; "tok_emb/weight" -> "token embedding"; ...
std::string component(const std::string& name) {
  if (name.rfind("tok_emb", 0) == 0) return "token embedding";
  if (name.rfind("pos_emb", 0) == 0) return "position embedding";
  if (name.find("/attn/") != std::string::npos) return "attention (qkv + proj)";
  if (name.find("/mlp/") != std::string::npos) return "mlp";
  if (name.find("/ln") != std::string::npos || name.rfind("ln_f", 0) == 0) return "layer norms";
  return "output head";
}

void print_model(const Config& config, const Model<float>& model) {
  const ModelSpec& s = model.spec();
  std::printf(
      "model        %s, d_model %lld, %s, %s x d_head %lld, %s, mlp %lld, vocab %lld, max_seq_len %lld, %s positions\n",
      config.model.kind.c_str(), (long long)s.d_model, counted(s.n_layers, "layer").c_str(),
      counted(s.n_heads, "head").c_str(), (long long)s.d_head, counted(s.n_kv_heads, "kv head").c_str(),
      (long long)s.d_mlp, (long long)s.vocab_size, (long long)s.max_seq_len, config.model.positions.c_str());
  if (!s.layer_heads.empty()) {  // a physically pruned model
    std::printf("layer heads ");
    for (int64_t l = 0; l < s.n_layers; ++l) std::printf(" L%lld %lld", (long long)l, (long long)s.heads_in_layer(l));
    std::printf(" (of %lld; %s in all)\n", (long long)s.n_heads, counted(s.total_heads(), "head").c_str());
  }
  std::printf("data         task %s, seq_len %lld\n", config.data.task.c_str(), (long long)config.data.seq_len);
  std::map<std::string, int64_t> counts;
  for (const ParamSpec& p : model.params().specs()) counts[component(p.name)] += p.shape.numel();
  std::printf("parameters   %lld\n", (long long)model.params().count());
  for (const auto& [name, n] : counts) std::printf("  %-24s %10lld\n", name.c_str(), (long long)n);
  std::printf("head gates  ");
  for (int l = 0; l < model.gates().size(); ++l) {
    const Tensor<float> g = model.gates().value(l);
    int64_t on = 0;
    for (int64_t h = 0; h < g.numel(); ++h) on += g.data()[h] != 0.0f;
    std::printf(" L%d %lld/%lld", l, (long long)on, (long long)g.numel());
  }
  std::printf(" (heads active per layer)\n");
}

// Every config key with its type, default, allowed values and doc (docs/config.md has the same rows).
void print_keys() {
  std::printf("%-24s %-18s %-30s %s\n", "key", "type", "default", "meaning");
  for (const ConfigKeyInfo& k : config_schema())
    std::printf("%-24s %-18s %-30s %s%s\n", k.key.c_str(), k.type.c_str(), k.default_value.c_str(), k.doc.c_str(),
                k.allowed.empty() ? "" : (" (allowed: " + k.allowed + ")").c_str());
}

// The build's provenance, one aligned line per field, as info's first lines and `headlab version`.
void print_build() {
  for (const ProvenanceField& f : provenance()) std::printf("%-12s %s\n", f.label, f.value.c_str());
}

}  // namespace

int run_version(int argc, char** argv) {
  cxxopts::Options options("headlab version", "Show the version, git commit, build type and BLIS kernel set.");
  options.add_options()("h,help", "show this help");
  if (!parse_options(options, {}, argc, argv)) return 0;
  print_build();
  return 0;
}

int run_info(int argc, char** argv) {
  cxxopts::Options options("headlab info",
                           "Show the build (version, commit, threads, BLIS kernels) and a checkpoint's "
                           "or config's model.");
  options.positional_help("[CHECKPOINT.h5 | RUN | CONFIG.toml]");
  options.add_options()("file", "checkpoint, run folder (its best.h5, else its newest checkpoint) or config",
                        cxxopts::value<std::string>())("set", "override a config key (with a config file)",
                                                       cxxopts::value<std::vector<std::string>>())(
      "keys", "list every config key: type, default, meaning and allowed values")("h,help", "show this help");
  const auto parsed = parse_options(options, {"file"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  if (args.count("keys")) {
    HEADLAB_CHECK(!args.count("file") && !args.count("set"), "--keys takes no file or --set");
    print_keys();
    return 0;
  }
  // Read and check the file first: a bad file is one error line, not a half-printed report.
  std::optional<Config> config;
  std::optional<Model<float>> model;
  RunProgress progress;
  std::string path;
  bool is_config = false;
  std::vector<ProvenanceField> written_by;
  if (args.count("file")) {
    path = args["file"].as<std::string>();
    is_config = path.size() > 5 && path.substr(path.size() - 5) == ".toml";
    HEADLAB_CHECK(is_config || !args.count("set"), "--set applies to a config file, not a checkpoint");
    if (!is_config) path = resolve_checkpoint(path);
    config = is_config ? load_config(path, list_option(args, "set")) : checkpoint_config(path);
    model.emplace(model_spec(*config));
    if (!is_config) {
      progress = load_training_checkpoint(path, *model, nullptr);
      written_by = recorded_provenance(CheckpointReader(path));
    }
  }
  print_build();
  std::printf("threads      %d (OpenMP; BLIS uses them for large GEMMs, 1 per call inside parallel loops)\n",
              num_threads());
  std::printf("attention    %s kernels (HEADLAB_NO_AVX512=1 picks baseline in a portable build)\n",
              attention_kernels_in_use());
  const std::filesystem::path share = share_dir();
  std::printf("shared files %s\n", share.empty() ? "(not found: install with cmake --install)" : share.c_str());
  try {
    std::printf("user cache   %s\n", user_cache_dir().c_str());
  } catch (const Error& e) {
    std::printf("user cache   (%s)\n", e.what());
  }
  if (!config) return 0;
  if (!is_config) {
    const RunProgress& p = progress;
    std::printf("checkpoint   %s, step %lld of %lld, %lld tokens seen%s\n", path.c_str(), (long long)p.step,
                (long long)config->train.steps, (long long)p.tokens_seen,
                p.has_best ? (", best val loss " + std::to_string(p.best_val_loss)).c_str() : "");
    // Older checkpoints do not record their build.
    std::string build;
    for (const ProvenanceField& f : written_by)
      build += (build.empty() ? "" : ", ") + std::string(f.label) + " " + f.value;
    std::printf("written by   %s\n", build.empty() ? "(not recorded: an older checkpoint)" : build.c_str());
  }
  print_model(*config, *model);
  return 0;
}

}  // namespace headlab::cli
