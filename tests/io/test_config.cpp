#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "headlab/common/error.h"
#include "headlab/io/config.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

// The source tree: HEADLAB_SOURCE_DIR when the build defines it, else the first directory at or
// above the working directory (tests run from the build dir) holding CMakeLists.txt and configs/.
fs::path source_dir() {
#ifdef HEADLAB_SOURCE_DIR
  return fs::path(HEADLAB_SOURCE_DIR);
#else
  for (fs::path dir = fs::current_path();; dir = dir.parent_path()) {
    if (fs::exists(dir / "CMakeLists.txt") && fs::is_directory(dir / "configs")) return dir;
    REQUIRE(dir != dir.root_path());  // not found: run the tests from inside the checkout
  }
#endif
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Config parse(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return parse_config_text(text, "configs/x.toml", overrides);
}

// A config with every key moved off its default (and every type exercised), still valid.
Config non_default_config() {
  Config c;
  c.model.kind = "encoder";
  c.model.vocab_size = 64;
  c.model.d_model = 96;
  c.model.n_heads = 6;
  c.model.n_kv_heads = 2;
  c.model.d_head = 24;
  c.model.n_layers = 3;
  c.model.mlp_ratio = 2;
  c.model.max_seq_len = 80;
  c.model.positions = "sinusoidal";
  c.model.dropout = 0.1;
  c.model.tie_embeddings = true;
  c.model.activation = "relu";
  c.model.norm_eps = 1e-6;
  c.model.bias = false;
  c.model.init_std = 0.035;
  c.model.n_classes = 5;
  c.model.pooling = "mean";
  c.data.task = "classify";
  c.data.path = "odd \"name\"\\with\ttabs.txt";
  c.data.seq_len = 64;
  c.data.seed = 7;
  c.data.train_fraction = 0.8;
  c.data.val_fraction = 0.15;
  c.data.vocab_size = 10;
  c.data.k = 3;
  c.data.offsets = {2, 5, 9};
  c.data.min_len = 4;
  c.data.max_len = 32;
  c.data.train_examples = 5000;
  c.train.steps = 20000;
  c.train.batch_size = 32;
  c.train.grad_accum = 2;
  c.train.seed = 123456789012;
  c.train.optimizer = "sgd";
  c.train.lr = 0.1 + 0.2;  // 0.30000000000000004: needs all 17 digits
  c.train.min_lr_ratio = 0.0;
  c.train.warmup_steps = 2000;
  c.train.schedule = "linear";
  c.train.weight_decay = 0.0;
  c.train.beta1 = 0.8;
  c.train.beta2 = 0.999;
  c.train.adam_eps = 1e-12;
  c.train.momentum = 0.0;
  c.train.grad_clip = 0.5;
  c.train.decay_biases = true;
  c.train.decay_norms = true;
  c.train.decay_embeddings = false;
  c.train.eval_every = 0;
  c.train.eval_batches = 4;
  c.train.log_every = 1;
  c.train.checkpoint_every = 0;
  c.train.keep_checkpoints = 0;
  c.train.threads = 2;
  return c;
}

}  // namespace

TEST_CASE("a default Config holds the documented defaults and is valid", "[io][config]") {
  const Config c;
  CHECK(c.model.kind == "decoder");
  CHECK(c.model.vocab_size == 256);
  CHECK(c.model.d_model == 128);
  CHECK(c.model.n_heads == 4);
  CHECK(c.model.n_kv_heads == 0);
  CHECK(c.model.d_head == 0);
  CHECK(c.model.norm_eps == 1e-5);
  CHECK(c.data.offsets == IntList{1, 3});
  CHECK(c.data.seq_len == 128);
  CHECK(c.train.lr == 2e-3);
  CHECK(c.train.schedule == "cosine");
  CHECK(c.train.decay_embeddings);
  CHECK_NOTHROW(validate(c));
  CHECK(parse("") == c);  // an empty file is the defaults
}

TEST_CASE("config_keys lists every key once, section by section", "[io][config]") {
  const std::vector<std::string> keys = config_keys();
  REQUIRE(keys.size() == config_schema().size());
  std::map<std::string, int> seen;
  for (const std::string& key : keys) ++seen[key];
  for (const auto& [key, count] : seen) {
    INFO(key);
    CHECK(count == 1);
  }
  CHECK(keys.front() == "model.kind");
  for (const std::string& key : keys) {
    const std::string section = key.substr(0, key.find('.'));
    CHECK((section == "model" || section == "data" || section == "train"));
  }
}

TEST_CASE("config_schema describes each key's type, default and allowed values", "[io][config]") {
  std::map<std::string, ConfigKeyInfo> rows;
  for (const ConfigKeyInfo& row : config_schema()) rows[row.key] = row;
  CHECK(rows.at("model.n_heads").type == "integer");
  CHECK(rows.at("model.n_heads").default_value == "4");
  CHECK(rows.at("model.n_heads").allowed == "> 0");
  CHECK(rows.at("model.kind").default_value == "\"decoder\"");
  CHECK(rows.at("model.kind").allowed == "decoder, encoder, encoder_decoder");
  CHECK(rows.at("model.dropout").type == "float");
  CHECK(rows.at("model.dropout").allowed == "[0, 1)");
  CHECK(rows.at("train.lr").default_value == "0.002");
  CHECK(rows.at("data.offsets").type == "array of integers");
  CHECK(rows.at("data.offsets").default_value == "[1, 3]");
  CHECK(rows.at("model.bias").allowed.empty());
  for (const ConfigKeyInfo& row : config_schema()) {  // docs become Markdown table cells
    INFO(row.key);
    CHECK(!row.doc.empty());
    CHECK(row.doc.find('|') == std::string::npos);
  }
}

TEST_CASE("a TOML file sets keys and --set overrides them in order", "[io][config]") {
  const Config c = parse(
      "[model]\n"
      "n_heads = 8\n"
      "d_model = 256\n"
      "[train]\n"
      "lr = 1  # an integer is fine for a float key\n",
      {"model.n_heads=2", "model.positions=sinusoidal", "data.offsets=[1, 2]", "train.lr=1e-3",
       "model.tie_embeddings=true", "data.path=my corpus.txt", "model.kind=\"decoder\"", "model.n_heads = 16"});
  CHECK(c.model.n_heads == 16);  // the last --set wins
  CHECK(c.model.d_model == 256);
  CHECK(c.model.positions == "sinusoidal");  // bare word for a string key
  CHECK(c.data.offsets == IntList{1, 2});
  CHECK(c.train.lr == 1e-3);
  CHECK(c.model.tie_embeddings);
  CHECK(c.data.path == "my corpus.txt");
  CHECK(c.model.n_layers == Config{}.model.n_layers);  // untouched keys keep their defaults
  CHECK(parse("[train]\nlr = 1\n").train.lr == 1.0);
}

TEST_CASE("dotted keys and inline tables are read like sections", "[io][config]") {
  const Config c = parse(
      "model.n_heads = 8\n"
      "data = { seq_len = 64, offsets = [2] }\n"
      "[train]\n"
      "steps = 5\n"
      "warmup_steps = 0\n");
  CHECK(c.model.n_heads == 8);
  CHECK(c.data.seq_len == 64);
  CHECK(c.data.offsets == IntList{2});
  CHECK(c.train.steps == 5);
}

TEST_CASE("to_toml writes every key and parses back to an equal Config", "[io][config]") {
  const Config c = non_default_config();
  REQUIRE_NOTHROW(validate(c));
  const std::string text = to_toml(c);
  INFO(text);
  CHECK(parse_config_text(text, "resolved.toml") == c);
  CHECK(parse_config_text(to_toml(Config{}), "resolved.toml") == Config{});
  for (const std::string& key : config_keys())
    CHECK(text.find(std::string("\n") + key.substr(key.find('.') + 1) + " = ") != std::string::npos);
}

TEST_CASE("config_value gives each key in the form --set reads back", "[io][config]") {
  const Config defaults;
  CHECK(config_value(defaults, "model.n_heads") == "4");
  CHECK(config_value(defaults, "model.positions") == "learned");
  CHECK(config_value(defaults, "data.offsets") == "[1, 3]");
  CHECK(config_value(defaults, "train.lr") == "0.002");
  CHECK(config_value(defaults, "model.dropout") == "0.0");
  CHECK(config_value(defaults, "model.bias") == "true");
  // Every key of a config that differs everywhere from the defaults survives key=config_value.
  const Config c = non_default_config();
  std::vector<std::string> overrides;
  for (const std::string& key : config_keys()) overrides.push_back(key + "=" + config_value(c, key));
  CHECK(parse("", overrides) == c);
  REQUIRE_THROWS_WITH(config_value(c, "model.n_head"),
                      Catch::Contains("unknown key 'model.n_head'; did you mean 'model.n_heads'?"));
}

TEST_CASE("TOML syntax errors name the file, line and column", "[io][config]") {
  REQUIRE_THROWS_WITH(parse("[model]\nd_model = \n"), Catch::Contains("TOML syntax error in configs/x.toml:2:"));
  REQUIRE_THROWS_WITH(parse("[model]\nn_heads = 4\nn_heads = 8\n"),
                      Catch::Contains("TOML syntax error in configs/x.toml:3") && Catch::Contains("n_heads"));
}

TEST_CASE("an unknown key names the file and line and suggests the closest key", "[io][config]") {
  REQUIRE_THROWS_WITH(parse("[model]\nn_heads = 4\nn_head = 8\n"),
                      Catch::Equals("unknown key 'model.n_head' in configs/x.toml:3; did you mean 'model.n_heads'?"));
  REQUIRE_THROWS_WITH(parse("", {"model.n_head=8"}),
                      Catch::Equals("unknown key 'model.n_head' in --set model.n_head=8; "
                                    "did you mean 'model.n_heads'?"));
  REQUIRE_THROWS_WITH(parse("[modle]\nn_heads = 8\n"), Catch::Contains("did you mean 'model.n_heads'?"));
  REQUIRE_THROWS_WITH(parse("[modle]\n"), Catch::Contains("unknown key 'modle' in configs/x.toml:1"));
  REQUIRE_THROWS_WITH(parse("model = 3\n"), Catch::Contains("'model' must be a table ([model]), got integer 3"));
  REQUIRE_THROWS_WITH(parse("", {"train.learning_rate=1e-3"}), Catch::Contains("unknown key 'train.learning_rate'") &&
                                                                   Catch::Contains("docs/config.md") &&
                                                                   Catch::Contains("headlab info --keys"));
}

TEST_CASE("the closest-key suggestion handles typos, other names and wrong sections", "[io][config]") {
  const std::pair<const char*, const char*> cases[] = {
      {"model.n_head", "model.n_heads"},  // not model.d_head: a missing letter beats a wrong one
      {"model.nhead", "model.n_heads"},       {"model.num_heads", "model.n_heads"},
      {"model.d_modle", "model.d_model"},     {"model.n_kv_head", "model.n_kv_heads"},
      {"n_layers", "model.n_layers"},         {"data.lr", "train.lr"},
      {"train.warmup", "train.warmup_steps"}, {"train.batchsize", "train.batch_size"},
  };
  for (const auto& [typo, suggestion] : cases) {
    INFO(typo);
    REQUIRE_THROWS_WITH(parse("", {std::string(typo) + "=1"}),
                        Catch::EndsWith("did you mean '" + std::string(suggestion) + "'?"));
  }
}

TEST_CASE("a value of the wrong type is named with its key, what it got and where", "[io][config]") {
  REQUIRE_THROWS_WITH(parse("[model]\nd_model = \"abc\"\n"),
                      Catch::Equals("model.d_model must be an integer, got string \"abc\" (configs/x.toml:2)"));
  REQUIRE_THROWS_WITH(parse("", {"model.d_model=abc"}),
                      Catch::Equals("model.d_model must be an integer, got string \"abc\" (--set model.d_model=abc)"));
  REQUIRE_THROWS_WITH(parse("[model]\nd_model = 128.0\n"), Catch::Contains("must be an integer, got float 128.0"));
  REQUIRE_THROWS_WITH(parse("[model]\nbias = 1\n"), Catch::Contains("model.bias must be a boolean"));
  REQUIRE_THROWS_WITH(parse("[train]\nlr = \"fast\"\n"), Catch::Contains("train.lr must be a number"));
  REQUIRE_THROWS_WITH(parse("[model]\nkind = 1\n"), Catch::Contains("model.kind must be a string, got integer 1"));
  REQUIRE_THROWS_WITH(parse("[data]\noffsets = 3\n"), Catch::Contains("data.offsets must be an array of integers"));
  REQUIRE_THROWS_WITH(parse("", {"data.offsets=[1, \"a\"]"}),
                      Catch::Contains("data.offsets[1] must be an integer, got string \"a\""));
}

TEST_CASE("out-of-range values and unknown choices are rejected", "[io][config]") {
  REQUIRE_THROWS_WITH(parse("[model]\nd_model = 0\n"),
                      Catch::Equals("model.d_model must be > 0, got 0 (configs/x.toml:2)"));
  REQUIRE_THROWS_WITH(parse("", {"model.n_layers=-1"}), Catch::Contains("model.n_layers must be > 0, got -1"));
  REQUIRE_THROWS_WITH(parse("", {"train.batch_size=0"}), Catch::Contains("train.batch_size must be > 0"));
  REQUIRE_THROWS_WITH(parse("", {"model.n_kv_heads=-2"}), Catch::Contains("model.n_kv_heads must be >= 0"));
  REQUIRE_THROWS_WITH(parse("", {"model.dropout=1"}), Catch::Contains("model.dropout must be in [0, 1), got 1.0"));
  REQUIRE_THROWS_WITH(parse("", {"model.dropout=-0.1"}), Catch::Contains("model.dropout must be in [0, 1)"));
  REQUIRE_THROWS_WITH(parse("", {"train.lr=nan"}), Catch::Contains("train.lr must be a finite number, got nan"));
  REQUIRE_THROWS_WITH(parse("", {"data.offsets=[1, 0]"}), Catch::Contains("data.offsets[1] must be > 0, got 0"));
  REQUIRE_THROWS_WITH(parse("", {"model.positions=rope"}),
                      Catch::Equals("model.positions must be one of learned, sinusoidal; got \"rope\" "
                                    "(--set model.positions=rope)"));
  REQUIRE_THROWS_WITH(parse("", {"data.task=copying"}), Catch::Contains("data.task must be one of text, k_relation"));
  REQUIRE_THROWS_WITH(parse("", {"train.schedule=Cosine"}),
                      Catch::StartsWith("train.schedule must be one of") &&
                          Catch::EndsWith("; got \"Cosine\"; did you mean 'cosine'? (--set train.schedule=Cosine)"));
  REQUIRE_THROWS_WITH(parse("", {"data.task=inducton"}), Catch::Contains("; did you mean 'induction'?"));
}

TEST_CASE("impossible combinations of keys are rejected with both values", "[io][config]") {
  REQUIRE_THROWS_WITH(parse("[model]\nd_model = 130\n"),
                      Catch::StartsWith("model.d_model=130 is not divisible by model.n_heads=4") &&
                          Catch::EndsWith("(configs/x.toml:2)"));
  CHECK_NOTHROW(parse("[model]\nd_model = 130\nd_head = 32\n"));  // an explicit d_head decouples them
  REQUIRE_THROWS_WITH(parse("", {"model.n_heads=8", "model.n_kv_heads=3"}),
                      Catch::Contains("model.n_kv_heads=3 does not divide model.n_heads=8"));
  REQUIRE_THROWS_WITH(parse("", {"model.n_kv_heads=8"}),
                      Catch::Contains("model.n_kv_heads=8 does not divide model.n_heads=4"));
  CHECK(parse("", {"model.n_heads=8", "model.n_kv_heads=2"}).model.n_kv_heads == 2);  // GQA
  CHECK(parse("", {"model.n_kv_heads=1"}).model.n_kv_heads == 1);                     // MQA
  REQUIRE_THROWS_WITH(parse("[data]\nseq_len = 512\n"),
                      Catch::Equals("data.seq_len=512 exceeds model.max_seq_len=256 (configs/x.toml:2)"));
  REQUIRE_THROWS_WITH(parse("", {"data.vocab_size=300"}), Catch::Contains("data.vocab_size=300 must be 0"));
  REQUIRE_THROWS_WITH(parse("", {"data.task=k_relation", "data.offsets=[1, 128]"}),
                      Catch::Contains("data.offsets holds 128, which is not below data.seq_len=128"));
  CHECK(parse("", {"data.offsets=[1, 128]"}).data.offsets.size() == 2);  // only k_relation reads them
  REQUIRE_THROWS_WITH(parse("", {"data.task=k_relation", "data.offsets=[]"}),
                      Catch::Contains("data.task=k_relation needs at least one entry in data.offsets"));
  REQUIRE_THROWS_WITH(parse("", {"data.min_len=10", "data.max_len=5"}),
                      Catch::Contains("data.min_len=10 exceeds data.max_len=5"));
  REQUIRE_THROWS_WITH(parse("", {"data.max_len=200"}), Catch::Contains("data.max_len=200 exceeds data.seq_len=128"));
  REQUIRE_THROWS_WITH(parse("", {"data.val_fraction=0.2"}), Catch::Contains("must be below 1"));
  REQUIRE_THROWS_WITH(parse("", {"data.path="}), Catch::Contains("data.task=text needs data.path"));
  REQUIRE_THROWS_WITH(parse("", {"model.kind=encoder"}), Catch::Contains("data.task=text needs model.kind=decoder"));
  REQUIRE_THROWS_WITH(parse("", {"data.task=classify"}),
                      Catch::Contains("data.task=classify needs model.kind=encoder"));
  REQUIRE_THROWS_WITH(parse("", {"train.warmup_steps=2000"}),
                      Catch::Contains("train.warmup_steps=2000 exceeds train.steps=1000"));
}

TEST_CASE("model.layer_heads takes one head count per layer, each in [0, n_heads], with MHA only", "[io][config]") {
  CHECK(parse("", {"model.layer_heads=[1, 4]"}).model.layer_heads == IntList{1, 4});
  CHECK(parse("", {"model.layer_heads=[0, 4]"}).model.layer_heads == IntList{0, 4});  // layer 0 removed whole
  CHECK(parse("", {"model.layer_heads=[]"}).model.layer_heads.empty());
  REQUIRE_THROWS_WITH(parse("", {"model.layer_heads=[1, 2, 3]"}),
                      Catch::StartsWith("model.layer_heads has 3 entries but model.n_layers=2") &&
                          Catch::EndsWith("(--set model.layer_heads=[1, 2, 3])"));
  REQUIRE_THROWS_WITH(parse("", {"model.layer_heads=[-1, 2]"}), Catch::Contains("model.layer_heads[0] must be >= 0"));
  REQUIRE_THROWS_WITH(parse("", {"model.layer_heads=[2, 5]"}),
                      Catch::Contains("model.layer_heads[1]=5 exceeds model.n_heads=4"));
  REQUIRE_THROWS_WITH(parse("", {"model.n_kv_heads=2", "model.layer_heads=[2, 2]"}),
                      Catch::Contains("model.layer_heads needs multi-head attention"));
}

TEST_CASE("model.active_heads takes one count per layer, each in [0, the layer's heads]", "[io][config]") {
  CHECK(parse("", {"model.active_heads=[3, 0]"}).model.active_heads == IntList{3, 0});
  CHECK(parse("", {"model.layer_heads=[1, 2]", "model.active_heads=[1, 0]"}).model.active_heads == IntList{1, 0});
  REQUIRE_THROWS_WITH(parse("", {"model.active_heads=[1]"}),
                      Catch::StartsWith("model.active_heads has 1 entries but model.n_layers=2"));
  REQUIRE_THROWS_WITH(parse("", {"model.active_heads=[-1, 2]"}), Catch::Contains("model.active_heads[0] must be >= 0"));
  REQUIRE_THROWS_WITH(parse("", {"model.active_heads=[5, 0]"}),
                      Catch::StartsWith("model.active_heads[0]=5 exceeds the layer's 4 heads"));
  REQUIRE_THROWS_WITH(parse("", {"model.layer_heads=[1, 2]", "model.active_heads=[1, 3]"}),
                      Catch::StartsWith("model.active_heads[1]=3 exceeds the layer's 2 heads"));
}

TEST_CASE("the model's own rules are nn's, checked on model_spec and reported naming the keys", "[io][config]") {
  const ModelSpec spec = model_spec(Config{});  // 0 = derived: n_kv_heads = n_heads, d_head = d_model / n_heads
  CHECK(spec.n_kv_heads == 4);
  CHECK(spec.d_head == 32);
  CHECK(spec.d_mlp == 4 * 128);
  CHECK(model_spec(parse("", {"model.n_kv_heads=2", "model.d_head=8"})).n_kv_heads == 2);
  // The rule nn alone had: the config now refuses it, naming the key and where it was set.
  REQUIRE_THROWS_WITH(parse("", {"model.positions=sinusoidal", "model.d_head=32", "model.d_model=129"}),
                      Catch::Equals("sinusoidal positions need an even model.d_model, got 129 "
                                    "(--set model.d_model=129)"));
  REQUIRE_THROWS_WITH(parse("", {"model.n_kv_heads=2", "model.layer_heads=[2, 2]"}),
                      Catch::Equals("model.layer_heads needs multi-head attention (model.n_kv_heads = model.n_heads), "
                                    "got model.n_kv_heads=2, model.n_heads=4; mask GQA/MQA heads with gates instead "
                                    "(--set model.layer_heads=[2, 2])"));
}

TEST_CASE("validate checks a Config built in code, without a file to name", "[io][config]") {
  Config c;
  c.model.n_heads = 3;
  REQUIRE_THROWS_WITH(validate(c), Catch::Equals("model.d_model=128 is not divisible by model.n_heads=3; "
                                                 "set model.d_head to choose the head width"));
  c = Config{};
  c.model.norm_eps = 0;
  REQUIRE_THROWS_WITH(validate(c), Catch::Equals("model.norm_eps must be > 0, got 0.0"));
}

TEST_CASE("malformed --set arguments and missing files are one-line errors", "[io][config]") {
  REQUIRE_THROWS_WITH(parse("", {"model.n_heads"}),
                      Catch::Contains("malformed --set 'model.n_heads': expected key=value"));
  REQUIRE_THROWS_WITH(parse("", {"=8"}), Catch::Contains("malformed --set '=8'"));
  REQUIRE_THROWS_WITH(load_config("configs/no_such_file.toml"),
                      Catch::Equals("cannot read config file 'configs/no_such_file.toml'"));
  REQUIRE_THROWS_WITH(load_config((source_dir() / "configs").string()), Catch::EndsWith("it is a directory"));
  // A --set value cannot smuggle in a second key.
  REQUIRE_THROWS_WITH(parse("", {"model.n_heads=8\nn_layers = 4"}),
                      Catch::Contains("model.n_heads must be an integer"));
  // Every error above is a single line.
  try {
    parse("[model]\nn_head = 8\n");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
  }
}

TEST_CASE("configs/default.toml sets every key, documents it, and equals the defaults", "[io][config]") {
  const fs::path path = source_dir() / "configs" / "default.toml";
  CHECK(load_config(path.string()) == Config{});
  // key -> the comment lines directly above its assignment.
  std::map<std::string, std::string> comment_of;
  std::istringstream lines(read_text(path));
  std::string line, section, comment;
  while (std::getline(lines, line)) {
    if (line.rfind("#", 0) == 0) {
      comment += line + "\n";
      continue;
    }
    if (line.rfind("[", 0) == 0) section = line.substr(1, line.find(']') - 1);
    if (const size_t eq = line.find(" = "); eq != std::string::npos && line[0] != '[')
      comment_of[section + "." + line.substr(0, eq)] = comment;
    comment.clear();
  }
  for (const ConfigKeyInfo& row : config_schema()) {
    INFO(row.key << " in " << path.string());
    REQUIRE(comment_of.count(row.key) == 1);
    CHECK_THAT(comment_of[row.key], Catch::Contains(row.doc) && Catch::Contains("default " + row.default_value));
  }
}

TEST_CASE("docs/config.md has the table row of every key", "[io][config]") {
  const fs::path path = source_dir() / "docs" / "config.md";
  const std::string docs = read_text(path);
  for (const ConfigKeyInfo& row : config_schema()) {
    const std::string expected = "| `" + row.key + "` | " + row.type + " | `" + row.default_value + "` | " +
                                 (row.allowed.empty() ? "" : "`" + row.allowed + "`") + " | " + row.doc + " |";
    INFO("docs/config.md needs this row:\n" << expected);
    CHECK(docs.find("\n" + expected + "\n") != std::string::npos);
  }
}
