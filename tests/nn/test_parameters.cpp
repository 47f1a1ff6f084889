#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "headlab/nn/model.h"
#include "support/tiny_model.h"

using namespace headlab;

namespace {

// Every parameter's initial values, by name.
std::vector<std::pair<std::string, std::vector<float>>> initial_values(const ModelSpec& spec, uint64_t seed) {
  Model<float> model(spec);
  model.params().init(seed);
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (int i = 0; i < model.params().size(); ++i) {
    const Tensor<float> v = model.params().value(i);
    out.emplace_back(model.params().spec(i).name, std::vector<float>(v.data(), v.data() + v.numel()));
  }
  return out;
}

}  // namespace

TEST_CASE("dropping parameters leaves every other parameter's initial values unchanged", "[nn][init]") {
  ModelSpec with = test::tiny_spec(ModelKind::decoder, 2, 2);
  ModelSpec without = with;
  without.bias = false;
  const auto all = initial_values(with, 7), fewer = initial_values(without, 7);
  REQUIRE(fewer.size() < all.size());
  size_t matched = 0;
  for (const auto& [name, values] : fewer)
    for (const auto& [other_name, other_values] : all)
      if (name == other_name) {
        INFO(name);
        CHECK(values == other_values);
        ++matched;
      }
  CHECK(matched == fewer.size());
}

TEST_CASE("parameter init streams differ between names and between seeds", "[nn][init]") {
  const ModelSpec spec = test::tiny_spec(ModelKind::decoder, 2, 2);
  const auto a = initial_values(spec, 7), b = initial_values(spec, 8);
  // blocks/0 and blocks/1 hold same-shaped weights, drawn from different streams.
  const auto find = [&](const std::string& name) -> const std::vector<float>& {
    for (const auto& [n, v] : a)
      if (n == name) return v;
    FAIL("no parameter " << name);
    return a.front().second;
  };
  const std::vector<float>& first = find("blocks/0/attn/qkv/weight");
  const std::vector<float>& second = find("blocks/1/attn/qkv/weight");
  REQUIRE(first.size() == second.size());
  CHECK(first != second);
  for (size_t i = 0; i < a.size(); ++i) {
    const bool random = a[i].second != std::vector<float>(a[i].second.size(), a[i].second.front());
    if (random) CHECK(a[i].second != b[i].second);
  }
}

TEST_CASE("the parameter layout records where each parameter sits, as it declares it", "[nn][init]") {
  // Every kind of spec: biases or none, learned or sinusoidal positions, tied or own LM head,
  // a classifier head, ragged layers.
  std::vector<ModelSpec> specs;
  for (bool bias : {true, false})
    for (bool tied : {false, true}) {
      ModelSpec s = test::tiny_spec(ModelKind::decoder, 4, 4);
      s.bias = bias;
      s.tie_embeddings = tied;
      s.positions = tied ? Positions::sinusoidal : Positions::learned;
      s.layer_heads = bias ? std::vector<int64_t>{} : std::vector<int64_t>{1, 3};
      specs.push_back(s);
    }
  specs.push_back(test::tiny_spec(ModelKind::encoder, 2, 2));
  for (const ModelSpec& spec : specs) {
    const ParamLayout layout = parameter_layout(spec);
    const std::vector<ParamSpec>& p = layout.specs;
    const ParamIndex& at = layout.index;
    std::vector<int> seen(p.size(), 0);
    // Index i must be a position of the table holding the named parameter; -1 only where the spec has none.
    auto check = [&](int i, const std::string& name, bool present) {
      INFO(name);
      if (!present) {
        CHECK(i == -1);
        return;
      }
      REQUIRE(i >= 0);
      REQUIRE(i < static_cast<int>(p.size()));
      CHECK(p[static_cast<size_t>(i)].name == name);
      ++seen[static_cast<size_t>(i)];
    };
    auto linear = [&](const LinearParams& l, const std::string& name) {
      check(l.weight, name + "/weight", true);
      check(l.bias, name + "/bias", spec.bias);
    };
    auto norm = [&](const NormParams& n, const std::string& name) {
      check(n.weight, name + "/weight", true);
      check(n.bias, name + "/bias", true);
    };
    check(at.tok_emb, "tok_emb/weight", true);
    check(at.pos_emb, "pos_emb/weight", spec.positions == Positions::learned);
    REQUIRE(at.blocks.size() == static_cast<size_t>(spec.n_layers));
    for (int64_t l = 0; l < spec.n_layers; ++l) {
      const BlockParams& b = at.blocks[static_cast<size_t>(l)];
      norm(b.ln1, block_name(l, "ln1"));
      linear(b.qkv, block_name(l, "attn/qkv"));
      linear(b.proj, block_name(l, "attn/proj"));
      norm(b.ln2, block_name(l, "ln2"));
      linear(b.fc, block_name(l, "mlp/fc"));
      linear(b.mlp_proj, block_name(l, "mlp/proj"));
    }
    norm(at.ln_f, "ln_f");
    if (spec.kind == ModelKind::encoder) {
      linear(at.head, "cls_head");
    } else if (spec.tie_embeddings) {
      CHECK(at.head.weight == at.tok_emb);
      CHECK(at.head.bias == -1);
    } else {
      check(at.head.weight, "lm_head/weight", true);
      CHECK(at.head.bias == -1);
    }
    // Every parameter is reached exactly once, and Model holds the same table and index.
    CHECK(seen == std::vector<int>(p.size(), 1));
    const Model<float> model(spec);
    REQUIRE(model.params().size() == static_cast<int>(p.size()));
    for (int i = 0; i < model.params().size(); ++i)
      CHECK(model.params().spec(i).name == p[static_cast<size_t>(i)].name);
    CHECK(model.param_index().blocks.size() == at.blocks.size());
    CHECK(model.param_index().head.weight == at.head.weight);
    CHECK(parameter_specs(spec).size() == p.size());
  }
}
