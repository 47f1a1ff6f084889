// src/analysis/attention_dump.cpp: the attention dump's writer and reader, which headlab analyze
// and headlab report share.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "headlab/analysis/attention_dump.h"
#include "headlab/common/error.h"
#include "headlab/io/checkpoint.h"
#include "support/scratch.h"
#include "support/tiny_model.h"

using namespace headlab;
using test::randomize;
using test::tiny_spec;
namespace fs = std::filesystem;

TEST_CASE("an attention dump reads back as it was written, from the .h5 or from the CSV alone", "[analysis]") {
  const int64_t T = 8;
  auto data = test::tiny_task(ModelKind::decoder, T);
  ModelSpec spec = tiny_spec(ModelKind::decoder, 11, 4, 4, T);
  spec.layer_heads = {2, 4};  // ragged: layer 0's heads 2 and 3 are NaN rows in the dense maps
  Model<double> model(spec);
  randomize(model, 5);
  const AttentionExample a = attention_example(model, *data, Split::val, 3, 4);
  test::ScratchDir s("attention_dump");
  write_attention_dump(s.dir.string(), "3", a, *data, -1, "ckpt.h5", "val");
  write_attention_dump(s.dir.string(), "prompt", a, *data, -1, "ckpt.h5", "prompt");
  write_attention_dump(s.dir.string(), "10", a, *data, -1, "ckpt.h5", "val");
  CHECK(attention_dump_names(s.dir.string()) == std::vector<std::string>{"3", "10", "prompt"});
  for (const char* file : {"attention_example_3.csv", "attention_example_3_tokens.csv", "attention_example_3.h5"})
    CHECK(fs::is_regular_file(s.dir / file));
  const CheckpointReader h5((s.dir / "attention_example_3.h5").string());
  CHECK(h5.kind() == FileKind::attention);
  CHECK(h5.string_attr("split") == "val");
  CHECK(h5.string_attr("example") == "3");

  std::vector<std::string> labels;
  for (int32_t token : a.row.tokens) labels.push_back(data->token_label(token));
  const AttentionDump exact = read_attention_dump(s.dir.string(), "3");
  CHECK(exact.name == "3");
  CHECK(exact.attention.n_layers == 2);
  CHECK(exact.attention.n_heads == 4);
  CHECK(exact.attention.seq_len == T);
  CHECK(exact.attention.layer_heads == std::vector<int64_t>{2, 4});
  CHECK(exact.attention.row.tokens == a.row.tokens);
  CHECK(exact.token_labels == labels);
  REQUIRE(exact.attention.probs.size() == a.probs.size());
  for (size_t i = 0; i < a.probs.size(); ++i)
    CHECK((exact.attention.probs[i] == a.probs[i] || (std::isnan(a.probs[i]) && std::isnan(exact.attention.probs[i]))));

  // Without the .h5: the CSV's %.5g values, the same layout, labels from _tokens.csv.
  fs::remove(s.dir / "attention_example_3.h5");
  const AttentionDump csv = read_attention_dump(s.dir.string(), "3");
  CHECK(csv.attention.layer_heads == std::vector<int64_t>{2, 4});
  CHECK(csv.attention.row.tokens.empty());
  CHECK(csv.token_labels == labels);
  REQUIRE(csv.attention.probs.size() == a.probs.size());
  for (size_t i = 0; i < a.probs.size(); ++i) {
    if (std::isnan(a.probs[i]))
      CHECK(std::isnan(csv.attention.probs[i]));
    else
      CHECK(csv.attention.probs[i] == Approx(a.probs[i]).epsilon(1e-4).margin(1e-9));
  }
}

// Found by tests/fuzz/fuzz_run_folder: the maps are held dense, and one row numbering layer and
// head 1000000 asked for 10^12 values.
TEST_CASE("an attention dump whose layer and head numbers its rows cannot back is refused in one line", "[analysis]") {
  test::ScratchDir s("attention_dump_bad");
  s.write("attention_example_0.csv", "layer,head,query,k0,k1\n0,0,0,1,0\n0,0,1,0.5,0.5\n1000000,1000000,0,1,0\n");
  REQUIRE_THROWS_MATCHES(read_attention_dump(s.dir.string(), "0"), Error,
                         Catch::Matchers::Message("attention_example_0.csv: its rows number layers up to 1000000 and "
                                                  "heads up to 1000000 but hold 3 rows of 2 keys: not the attention "
                                                  "dump of one model"));
  s.write("attention_example_0.csv", "layer,head,query,k0\n9223372036854775806,0,0,1\n");
  REQUIRE_THROWS_MATCHES(read_attention_dump(s.dir.string(), "0"), Error,
                         Catch::Matchers::Message("attention_example_0.csv: row 1 has '9223372036854775806' for layer, "
                                                  "not a count"));
  s.write("attention_example_0.csv", "step,loss\n1,2\n");
  REQUIRE_THROWS_MATCHES(read_attention_dump(s.dir.string(), "0"), Error,
                         Catch::Matchers::Message((s.dir / "attention_example_0.csv").string() +
                                                  ": not an attention dump (layer,head,query,k0,...)"));
}
