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
