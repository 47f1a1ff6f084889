// headlab info [CHECKPOINT.h5 | RUN | CONFIG.toml] [--keys] [--json]: the build (version, commit,
// threads, BLIS kernel set, where the shared files and the user cache are) and, for a checkpoint or
// config, the model: shape, parameter count per component, head gates, and the build that wrote the
// checkpoint. --keys: every config key. --json: the same facts as one JSON object (README.md lists
// its fields). headlab version (also --version, -V): the build's lines alone.
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/common/error.h"
#include "headlab/common/parallel.h"
#include "headlab/common/paths.h"
#include "headlab/data/task_registry.h"
#include "headlab/ops/attention.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/json.h"
#include "headlab/io/provenance.h"
#include "headlab/linalg/gemm.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"
#include "options.h"
#include "verbs.h"

namespace headlab::cli {

namespace {

// A parameter's component, as the text shows it and as --json names it.
struct Component {
  const char* label;  // "attention (qkv + proj)"
  const char* key;    // "attention"
};

// "blocks/3/attn/qkv/weight" -> attention; "tok_emb/weight" -> token embedding; an
// encoder_decoder's encoder ("enc/...") counts with the decoder's components, its cross-attention
// ("blocks/3/cross/q/weight") on its own, its LayerNorm with the layer norms.
Component component(const std::string& name) {
  const auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (name.rfind("tok_emb", 0) == 0) return {"token embedding", "token_embedding"};
  if (has("pos_emb")) return {"position embedding", "position_embedding"};
  if (has("/attn/")) return {"attention (qkv + proj)", "attention"};
  if (has("/cross/") && !has("/cross/ln")) return {"cross-attention (q + kv + proj)", "cross_attention"};
  if (has("/mlp/")) return {"mlp", "mlp"};
  if (has("/ln") || name.rfind("ln_f", 0) == 0) return {"layer norms", "layer_norms"};
  return {"output head", "output_head"};
}

// Parameters per component, in the text's (alphabetical) order of labels.
std::map<std::string, std::pair<Component, int64_t>> parameter_counts(const Model<float>& model) {
  std::map<std::string, std::pair<Component, int64_t>> counts;
  for (const ParamSpec& p : model.params().specs()) {
    const Component c = component(p.name);
    auto& entry = counts.try_emplace(c.label, c, 0).first->second;
    entry.second += p.shape.numel();
  }
  return counts;
}

// The heads of layer l whose gate is not 0.
int64_t active_heads(const Model<float>& model, int layer) {
  const Tensor<float> g = model.gates().value(layer);
  int64_t on = 0;
  for (int64_t h = 0; h < g.numel(); ++h) on += g.data()[h] != 0.0f;
  return on;
}

// A gate table's label: "L3" in a model with one attention per layer; "enc.L0", "dec.L2",
// "cross.L2" in an encoder_decoder.
std::string site_label(const ModelSpec& spec, int site) {
  if (!model_kind_info(spec.kind).source) return "L" + std::to_string(site);
  const AttentionSite where = spec.attention_sites()[static_cast<size_t>(site)];
  return std::string(attention_kind_name(where.kind)) + ".L" + std::to_string(where.layer);
}

// The heads a site had before any was removed: "4", or "enc 4, dec 2, cross 4" in an encoder_decoder.
std::string unpruned_heads(const ModelSpec& spec) {
  if (!model_kind_info(spec.kind).source) return std::to_string(spec.n_heads);
  std::string out;
  for (const AttentionKind kind : {AttentionKind::enc, AttentionKind::dec, AttentionKind::cross})
    out += concat(out.empty() ? "" : ", ", attention_kind_name(kind), " ", spec.kind_shape(kind).heads);
  return out;
}

// The text tokenizer: kind and vocabulary (a checkpoint's stored one, else what the config makes).
struct TokenizerInfo {
  std::string kind;
  int64_t vocab_size = 0;
};
std::optional<TokenizerInfo> tokenizer_info(const Config& config, const Tokenizer* stored) {
  if (stored != nullptr) return TokenizerInfo{stored->kind(), stored->vocab_size()};
  if (task_named(config.data.task).family != TaskFamily::text) return std::nullopt;
  const bool bytes = config.data.tokenizer == "bytes";
  return TokenizerInfo{config.data.tokenizer, bytes ? 256 : config.data.vocab_size};
}

void print_model(const Config& config, const Model<float>& model, const std::optional<TokenizerInfo>& tokenizer) {
  const ModelSpec& s = model.spec();
  std::printf(
      "model        %s, d_model %lld, %s, %s x d_head %lld, %s, mlp %lld, vocab %lld, max_seq_len %lld, %s positions\n",
      config.model.kind.c_str(), (long long)s.d_model, counted(s.n_layers, "layer").c_str(),
      counted(s.n_heads, "head").c_str(), (long long)s.d_head, counted(s.n_kv_heads, "kv head").c_str(),
      (long long)s.d_mlp, (long long)s.vocab_size, (long long)s.max_seq_len, config.model.positions.c_str());
  if (model_kind_info(s.kind).source) {  // each attention kind's own stack and heads
    std::printf("attention   ");
    for (const AttentionKind kind : {AttentionKind::enc, AttentionKind::dec, AttentionKind::cross}) {
      const int64_t layers = kind == AttentionKind::enc ? s.n_encoder_layers : s.n_layers;
      const AttentionShape a = s.kind_shape(kind);
      std::printf(" %s %lld x %lld heads (%lld kv) x d_head %lld%s", attention_kind_name(kind), (long long)layers,
                  (long long)a.heads, (long long)a.kv_heads, (long long)a.d_head,
                  kind == AttentionKind::cross ? "" : ";");
    }
    std::printf("\n");
  }
  if (!s.layer_heads.empty()) {  // a physically pruned model: heads left per attention site
    std::printf("layer heads ");
    const std::vector<AttentionSite> sites = s.attention_sites();
    for (size_t i = 0; i < sites.size(); ++i)
      std::printf(" %s %lld", site_label(s, static_cast<int>(i)).c_str(), (long long)s.heads_at_site(sites[i]));
    std::printf(" (of %s; %s in all)\n", unpruned_heads(s).c_str(), counted(s.total_heads(), "head").c_str());
  }
  std::printf("data         task %s, seq_len %lld", config.data.task.c_str(), (long long)config.data.seq_len);
  if (tokenizer) std::printf(", tokenizer %s (vocab %lld)", tokenizer->kind.c_str(), (long long)tokenizer->vocab_size);
  std::printf("\n");
  std::printf("parameters   %lld\n", (long long)model.params().count());
  for (const auto& [label, count] : parameter_counts(model))
    std::printf("  %-31s %10lld\n", label.c_str(), (long long)count.second);
  std::printf("head gates  ");
  for (int l = 0; l < model.gates().size(); ++l)
    std::printf(" %s %lld/%lld", site_label(s, l).c_str(), (long long)active_heads(model, l),
                (long long)model.gates().value(l).numel());
  std::printf(" (heads active per layer)\n");
}

// What print_model shows, as the members "model", "data", "parameters" and "head_gates".
void add_model_json(JsonObject& out, const Config& config, const Model<float>& model,
                    const std::optional<TokenizerInfo>& tokenizer) {
  const ModelSpec& s = model.spec();
  std::vector<std::string> layer_heads, active, gates, sites;
  for (int l = 0; l < model.gates().size(); ++l) {
    sites.push_back(json_string(site_label(s, l)));
    layer_heads.push_back(std::to_string(s.attention_shape(s.attention_sites()[static_cast<size_t>(l)]).heads));
    active.push_back(std::to_string(active_heads(model, l)));
    const Tensor<float> g = model.gates().value(l);
    std::vector<std::string> values;
    for (int64_t h = 0; h < g.numel(); ++h) values.push_back(json_number(g.data()[h]));
    gates.push_back(json_list(values));
  }
  JsonObject m;
  m.text("kind", config.model.kind)
      .integer("d_model", s.d_model)
      .integer("n_layers", s.n_layers)
      .integer("n_heads", s.n_heads)
      .integer("d_head", s.d_head)
      .integer("n_kv_heads", s.n_kv_heads)
      .integer("d_mlp", s.d_mlp)
      .integer("vocab_size", s.vocab_size)
      .integer("max_seq_len", s.max_seq_len)
      .text("positions", config.model.positions)
      .boolean("heads_removed", !s.layer_heads.empty())
      .raw("layer_heads", json_list(layer_heads))
      .integer("total_heads", s.total_heads());
  JsonObject params;
  params.integer("total", model.params().count());
  for (const auto& [label, count] : parameter_counts(model)) params.integer(count.first.key, count.second);
  out.raw("model", m.str())
      .raw("data",
           JsonObject()
               .text("task", config.data.task)
               .integer("seq_len", config.data.seq_len)
               .raw("tokenizer",
                    tokenizer
                        ? JsonObject().text("kind", tokenizer->kind).integer("vocab_size", tokenizer->vocab_size).str()
                        : "null")
               .str())
      .raw("parameters", params.str())
      .raw("head_gates", JsonObject()
                             .raw("sites", json_list(sites))
                             .raw("active", json_list(active))
                             .raw("values", json_list(gates))
                             .str());
}

// Every config key with its type, default, allowed values and doc (docs/config.md has the same rows).
void print_keys() {
  std::printf("%-24s %-18s %-30s %s\n", "key", "type", "default", "meaning");
  for (const ConfigKeyInfo& k : config_schema())
    std::printf("%-24s %-18s %-30s %s%s\n", k.key.c_str(), k.type.c_str(), k.default_value.c_str(), k.doc.c_str(),
                k.allowed.empty() ? "" : (" (allowed: " + k.allowed + ")").c_str());
}

std::string keys_json() {
  std::vector<std::string> keys;
  for (const ConfigKeyInfo& k : config_schema())
    keys.push_back(JsonObject()
                       .text("key", k.key)
                       .text("type", k.type)
                       .text("default", k.default_value)
                       .text("allowed", k.allowed)
                       .text("doc", k.doc)
                       .str());
  return JsonObject().raw("keys", json_list(keys)).str();
}

// The build's provenance, one aligned line per field, as info's first lines and `headlab version`.
void print_build() {
  for (const ProvenanceField& f : provenance()) std::printf("%-12s %s\n", f.label, f.value.c_str());
}

// Provenance fields as an object keyed as the HDF5 attributes are ("headlab_commit").
std::string provenance_json(const std::vector<ProvenanceField>& fields) {
  JsonObject o;
  for (const ProvenanceField& f : fields) o.text(f.key, f.value);
  return o.str();
}

// info --json: the lines info prints, as one object. A checkpoint adds "checkpoint", a config
// file "config"; either adds the model's members (add_model_json).
void print_info_json(const Config* config, const Model<float>* model, const std::string& path, bool is_config,
                     const RunProgress& progress, const std::vector<ProvenanceField>& written_by,
                     const std::optional<TokenizerInfo>& tokenizer) {
  JsonObject out;
  out.raw("build", provenance_json(provenance()))
      .integer("threads", num_threads())
      .text("attention_kernels", attention_kernels_in_use());
  const std::filesystem::path share = share_dir();
  out.raw("shared_files", share.empty() ? "null" : json_string(share.string()));
  try {
    out.text("user_cache", user_cache_dir().string());
  } catch (const Error& e) {
    out.raw("user_cache", "null").text("user_cache_problem", e.what());
  }
  if (config && is_config) {
    out.raw("config", JsonObject().text("path", path).str());
  } else if (config) {
    const RunProgress& p = progress;
    out.raw("checkpoint", JsonObject()
                              .text("path", path)
                              .integer("step", p.step)
                              .integer("steps", config->train.steps)
                              .integer("tokens_seen", p.tokens_seen)
                              .raw("best_val_loss", p.has_best ? json_number(p.best_val_loss) : "null")
                              .raw("written_by", written_by.empty() ? "null" : provenance_json(written_by))
                              .str());
  }
  if (config) add_model_json(out, *config, *model, tokenizer);
  std::printf("%s\n", out.str().c_str());
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
      "keys", "list every config key: type, default, meaning and allowed values")(
      "json", "print the same facts as one JSON object (full precision)")("h,help", "show this help");
  const auto parsed = parse_options(options, {"file"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  const bool json = args.count("json") > 0;
  if (args.count("keys")) {
    HEADLAB_CHECK(!args.count("file") && !args.count("set"), "--keys takes no file or --set");
    if (json)
      std::printf("%s\n", keys_json().c_str());
    else
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
  std::optional<TokenizerInfo> tokenizer;
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
    tokenizer = tokenizer_info(*config, is_config ? nullptr : checkpoint_tokenizer(path, *config).get());
  }
  if (json) {
    print_info_json(config ? &*config : nullptr, model ? &*model : nullptr, path, is_config, progress, written_by,
                    tokenizer);
    return 0;
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
  print_model(*config, *model, tokenizer);
  return 0;
}

}  // namespace headlab::cli
