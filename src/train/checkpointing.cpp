#include "headlab/train/checkpointing.h"

#include <filesystem>
#include <set>

#include "headlab/data/task_registry.h"
#include "headlab/io/checkpoint.h"
#include "headlab/train/run_folder.h"
#include "headlab/train/setup.h"

namespace headlab {

namespace {
constexpr const char* kModelPrefix = "model/";
constexpr const char *kTokenizerKind = "tokenizer", *kTokenizerModel = "tokenizer/model";

// FFN unit gates are saved only when a unit is switched off (a gate is not 1), so checkpoints of
// models that never pruned a unit, and those written before FFN gates existed, hold none: their
// gates are all 1. A file has all of them or none.
bool has_ffn_gates(const CheckpointReader& r, const ModelSpec& spec) {
  return r.has(kModelPrefix + ffn_gate_specs(spec).front().name);
}
template <typename T>
bool ffn_gates_all_ones(const Model<T>& model) {
  for (int i = 0; i < model.ffn_gates().size(); ++i) {
    const Tensor<T> g = model.ffn_gates().value(i);
    for (int64_t f = 0; f < g.numel(); ++f)
      if (g.data()[f] != T(1)) return false;
  }
  return true;
}

// Refuses, before anything is allocated, a file whose model datasets are not exactly those of
// the model `config` describes (names and shapes from the spec alone): a config attribute
// claiming a huge model would otherwise have it allocated before the loader's shape checks.
void check_model_tensors(const CheckpointReader& r, const Config& config) {
  const ModelSpec spec = model_spec(config);
  std::vector<ParamSpec> want = parameter_specs(spec);
  for (ParamSpec& gate : gate_specs(spec)) want.push_back(std::move(gate));
  if (has_ffn_gates(r, spec))
    for (ParamSpec& gate : ffn_gate_specs(spec)) want.push_back(std::move(gate));
  std::set<std::string> names;
  for (const ParamSpec& p : want) {
    const std::string name = kModelPrefix + p.name;
    names.insert(name);
    HEADLAB_CHECK(r.has(name), r.path() << ": missing " << name << ", which the model its config describes has");
    HEADLAB_CHECK(r.shape(name) == p.shape, r.path() << ": " << name << " has shape " << r.shape(name).str()
                                                     << ", the model its config describes has " << p.shape.str());
  }
  for (const std::string& name : r.names())
    HEADLAB_CHECK(name.rfind(kModelPrefix, 0) != 0 || names.count(name),
                  r.path() << ": " << name << " is not a tensor of the model its config describes");
}
}  // namespace

void save_training_checkpoint(const std::string& path, const Config& config, const Model<float>& model,
                              const Optimizer<float>* optimizer, const RunProgress& progress,
                              const Tokenizer* tokenizer) {
  CheckpointWriter w(FileKind::checkpoint);
  if (tokenizer != nullptr) {
    const std::string bytes = tokenizer->serialized();
    w.set_string_attr(kTokenizerKind, tokenizer->kind());
    w.add_array(kTokenizerModel, reinterpret_cast<const uint8_t*>(bytes.data()),
                Shape{static_cast<int64_t>(bytes.size())});
  }
  for (int i = 0; i < model.params().size(); ++i)
    w.add(kModelPrefix + model.params().spec(i).name, model.params().value(i));
  for (int i = 0; i < model.gates().size(); ++i)
    w.add(kModelPrefix + model.gates().spec(i).name, model.gates().value(i));
  if (!ffn_gates_all_ones(model))
    for (int i = 0; i < model.ffn_gates().size(); ++i)
      w.add(kModelPrefix + model.ffn_gates().spec(i).name, model.ffn_gates().value(i));
  if (optimizer != nullptr) {
    for (const auto& [name, tensor] : optimizer->state_tensors()) w.add(name, tensor);
    w.set_string_attr("optimizer", optimizer->kind());
    w.set_int_attr("optimizer_steps", optimizer->step_count());
  }
  w.set_string_attr("config", to_toml(config));
  w.set_int_attr("step", progress.step);
  w.set_int_attr("has_best", progress.has_best);
  w.set_double_attr("best_val_loss", progress.best_val_loss);
  w.set_double_attr("elapsed_s", progress.elapsed_s);
  w.set_double_attr("log_loss_sum", progress.log_loss_sum);
  w.set_int_attr("log_loss_steps", progress.log_loss_steps);
  w.set_int_attr("tokens_seen", progress.tokens_seen);
  w.set_string_attr("rng", "counter");
  w.commit(path);
}

Config checkpoint_config(const std::string& path, const std::vector<std::string>& overrides) {
  CheckpointReader r(path);
  r.require_kind(FileKind::checkpoint);
  HEADLAB_CHECK(r.has_attr("config"), path << ": not a training checkpoint (no config attribute)");
  Config config = parse_config_text(r.string_attr("config"), path + " (config attribute)", overrides);
  check_model_tensors(r, config);
  return config;
}

Config pruned_config(const Config& config, const ModelSpec& spec) {
  Config c = config;
  c.model.layer_heads = spec.layer_heads;
  c.model.active_heads = spec.active_heads;
  c.model.mlp_units = spec.mlp_units;
  c.model.d_head = spec.d_head;             // n_heads stays the unpruned count, but say the width outright
  if (model_kind_info(spec.kind).source) {  // enc_n_heads and cross_n_heads alike
    c.model.enc_d_head = spec.enc_d_head;
    c.model.cross_d_head = spec.cross_d_head;
  }
  validate(c);
  // Nothing but the head counts may differ: the parameter tables must agree name for name.
  const std::vector<ParamSpec> want = parameter_specs(spec), got = parameter_specs(model_spec(c));
  bool same = want.size() == got.size();
  for (size_t i = 0; same && i < want.size(); ++i) same = want[i].name == got[i].name && want[i].shape == got[i].shape;
  HEADLAB_CHECK(same,
                "pruned checkpoint: the config's model section does not describe this model (other than in its heads "
                "and FFN units)");
  return c;
}

void save_pruned_checkpoint(const std::string& path, const Config& config, const Model<float>& model, int64_t step,
                            const Tokenizer* tokenizer) {
  RunProgress progress;
  progress.step = step;
  save_training_checkpoint(path, pruned_config(config, model.spec()), model, nullptr, progress, tokenizer);
}

std::shared_ptr<const Tokenizer> checkpoint_tokenizer(const std::string& path, const Config& config) {
  const TaskFamily family = task_named(config.data.task).family;
  if (family == TaskFamily::generated) return nullptr;
  CheckpointReader r(path);
  r.require_kind(FileKind::checkpoint);
  if (!r.has_attr(kTokenizerKind)) {  // written before checkpoints stored their tokenizer: bytes
    HEADLAB_CHECK(config.data.tokenizer == "bytes",
                  path << ": stores no tokenizer, but its config has data.tokenizer = " << config.data.tokenizer);
    return byte_tokenizer(family == TaskFamily::parallel);  // translation has always had the specials
  }
  const std::string kind = r.string_attr(kTokenizerKind);
  HEADLAB_CHECK(
      r.has(kTokenizerModel) && r.dtype(kTokenizerModel) == ArrayDType::uint8 && r.shape(kTokenizerModel).rank == 1,
      path << ": has a tokenizer attribute but no " << kTokenizerModel << " bytes");
  const std::vector<uint8_t> bytes = r.read_array<uint8_t>(kTokenizerModel);
  std::shared_ptr<const Tokenizer> tokenizer =
      load_tokenizer(kind, std::string(bytes.begin(), bytes.end()), concat(path, " (", kTokenizerModel, ")"));
  HEADLAB_CHECK(
      config.data.tokenizer == tokenizer->kind(),
      path << ": stores a " << tokenizer->kind() << " tokenizer, but data.tokenizer = " << config.data.tokenizer);
  HEADLAB_CHECK(tokenizer->vocab_size() <= config.model.vocab_size,
                path << ": its " << tokenizer->kind() << " tokenizer has " << tokenizer->vocab_size()
                     << " tokens, more than model.vocab_size = " << config.model.vocab_size);
  return tokenizer;
}

RunProgress load_training_checkpoint(const std::string& path, Model<float>& model, Optimizer<float>* optimizer) {
  CheckpointReader r(path);
  r.require_kind(FileKind::checkpoint);
  auto read = [&](const std::string& name, const Tensor<float>& into) {
    HEADLAB_CHECK(r.has(name), path << ": missing " << name << " (checkpoint of a different model?)");
    r.read_into(name, into);
  };
  for (int i = 0; i < model.params().size(); ++i)
    read(kModelPrefix + model.params().spec(i).name, model.params().value(i));
  for (int i = 0; i < model.gates().size(); ++i)
    read(kModelPrefix + model.gates().spec(i).name, model.gates().value(i));
  const bool ffn_gates = has_ffn_gates(r, model.spec());
  model.ffn_gates().init(0);  // all ones unless the file has them
  if (ffn_gates)
    for (int i = 0; i < model.ffn_gates().size(); ++i)
      read(kModelPrefix + model.ffn_gates().spec(i).name, model.ffn_gates().value(i));
  // A file with more model tensors than this model has was made by a different architecture.
  int64_t model_tensors = 0;
  for (const std::string& name : r.names()) model_tensors += name.rfind(kModelPrefix, 0) == 0;
  const int64_t expected = model.params().size() + model.gates().size() + (ffn_gates ? model.ffn_gates().size() : 0);
  HEADLAB_CHECK(model_tensors == expected,
                path << ": holds " << model_tensors << " model tensors, this model has " << expected);
  if (optimizer != nullptr) {
    HEADLAB_CHECK(r.has_attr("optimizer") && r.string_attr("optimizer") == optimizer->kind(),
                  path << ": optimizer state is for '"
                       << (r.has_attr("optimizer") ? r.string_attr("optimizer") : "none") << "', this run uses '"
                       << optimizer->kind() << "'");
    for (const auto& [name, tensor] : optimizer->state_tensors()) read(name, tensor);
    optimizer->set_step_count(r.int_attr("optimizer_steps"));
  }
  RunProgress p;
  p.step = r.int_attr("step");
  p.has_best = r.int_attr("has_best") != 0;
  p.best_val_loss = r.double_attr("best_val_loss");
  p.elapsed_s = r.double_attr("elapsed_s");
  p.log_loss_sum = r.double_attr("log_loss_sum");
  p.log_loss_steps = r.int_attr("log_loss_steps");
  p.tokens_seen = r.int_attr("tokens_seen");
  return p;
}

bool continue_optimizer_state(const std::string& path, Optimizer<float>& optimizer) {
  CheckpointReader r(path);
  r.require_kind(FileKind::checkpoint);
  if (!r.has_attr("optimizer") || r.string_attr("optimizer") != optimizer.kind()) return false;
  for (const auto& [name, tensor] : optimizer.state_tensors())
    if (!r.has(name) || r.shape(name) != tensor.shape()) return false;
  for (const auto& [name, tensor] : optimizer.state_tensors()) r.read_into(name, tensor);
  optimizer.set_step_count(r.int_attr("optimizer_steps"));
  return true;
}

OpenedCheckpoint open_checkpoint(const std::string& path, const std::vector<std::string>& overrides) {
  OpenedCheckpoint c;
  c.config = checkpoint_config(path, overrides);
  c.model = std::make_unique<Model<float>>(model_spec(c.config));
  c.progress = load_training_checkpoint(path, *c.model, nullptr);
  c.dataset = make_dataset(c.config, checkpoint_tokenizer(path, c.config));
  return c;
}

std::string resolve_checkpoint(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;  // a file, or a missing path the reader reports
  if (const std::string best = best_checkpoint_path(path); fs::is_regular_file(best, ec)) return best;
  if (const auto newest = newest_checkpoint(path)) return newest->path;
  throw Error(path +
              " is a folder without checkpoints (a run folder has checkpoints/best.h5 or "
              "checkpoints/step_<N>.h5)");
}

std::string checkpoint_run_folder(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::absolute(path).lexically_normal().parent_path();
  return (dir.filename() == "checkpoints" ? dir.parent_path() : dir).string();
}

}  // namespace headlab
