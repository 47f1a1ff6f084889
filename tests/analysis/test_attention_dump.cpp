// src/analysis/attention_dump.cpp: the attention dump's writer and reader, which headlab analyze
// and headlab report share.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "headlab/analysis/attention_dump.h"
#include "headlab/common/error.h"
#include "headlab/data/translation.h"
#include "headlab/io/checkpoint.h"
#include "support/bible_verse.h"
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

namespace {

using test::tiny_translation;  // sources longer than their targets (S != T)

void check_same(const AttentionMaps& got, const AttentionMaps& want) {
  CHECK(got.n_layers == want.n_layers);
  CHECK(got.n_heads == want.n_heads);
  CHECK(got.n_queries == want.n_queries);
  CHECK(got.n_keys == want.n_keys);
  CHECK(got.layer_heads == want.layer_heads);
  REQUIRE(got.probs.size() == want.probs.size());
  for (size_t i = 0; i < want.probs.size(); ++i)
    CHECK((got.probs[i] == want.probs[i] || (std::isnan(want.probs[i]) && std::isnan(got.probs[i]))));
}

}  // namespace

TEST_CASE("an encoder_decoder's dump holds its encoder, decoder and cross-attention, and reads back exactly",
          "[analysis]") {
  test::ScratchDir s("attention_dump_seq2seq");
  const std::unique_ptr<TranslationDataset> data = tiny_translation(s);
  ModelSpec spec = test::tiny_seq2seq_spec(2, 4, 2, 1);  // decoder 2 heads, encoder 4, cross 2 over 1 K/V head
  spec.vocab_size = data->vocab_size();
  spec.max_seq_len = 32;
  Model<double> model(spec);
  randomize(model, 7);

  // An example of val whose source is padded in its batch (a shorter source than another row's).
  AttentionExample a;
  bool padded = false;
  int64_t example = 0;
  for (; example < 4 && !padded; ++example) {
    a = attention_example(model, *data, Split::val, example, 4);
    for (uint8_t real : a.row.source_padding) padded = padded || real == 0;
  }
  REQUIRE(padded);
  // Two plain files carry no Strong's tags: no gold alignment, and no file for one.
  CHECK(example_gold_alignment(*data, Split::val, example - 1, 4, a.row).empty());
  const int64_t T = a.seq_len, S = a.row.source_len;
  REQUIRE(S != T);
  CHECK(a.n_layers == 2);
  CHECK(a.layer_heads == std::vector<int64_t>{2, 2});
  CHECK((a.encoder.n_layers == 2 && a.encoder.n_heads == 4 && a.encoder.n_queries == S && a.encoder.n_keys == S));
  CHECK((a.cross.n_layers == 2 && a.cross.n_heads == 2 && a.cross.n_queries == T && a.cross.n_keys == S));
  // Each cross row is a distribution over the real source keys; padded keys get 0.
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t t = 0; t < T; ++t) {
        const double* row = a.cross.probs.data() + ((l * 2 + h) * T + t) * S;
        double real_sum = 0;
        for (int64_t k = 0; k < S; ++k) {
          if (a.row.source_padding[k])
            real_sum += row[k];
          else
            CHECK(row[k] == 0);
        }
        CHECK(real_sum == Approx(1).epsilon(1e-12));
      }

  write_attention_dump(s.dir.string(), "1", a, *data, -1, "ckpt.h5", "val");
  for (const char* file :
       {"attention_example_1.csv", "attention_example_1_encoder.csv", "attention_example_1_cross.csv",
        "attention_example_1_tokens.csv", "attention_example_1_source_tokens.csv"})
    CHECK(fs::is_regular_file(s.dir / file));
  CHECK_FALSE(fs::exists(s.dir / "attention_example_1_gold_alignment.csv"));
  CHECK(attention_dump_names(s.dir.string()) == std::vector<std::string>{"1"});
  std::vector<std::string> labels, source_labels;
  for (int32_t token : a.row.tokens) labels.push_back(data->token_label(token));
  for (int32_t token : a.row.source_tokens) source_labels.push_back(data->token_label(token));

  const AttentionDump exact = read_attention_dump(s.dir.string(), "1");
  check_same(exact.attention.self_attention(), a.self_attention());
  check_same(exact.attention.encoder, a.encoder);
  check_same(exact.attention.cross, a.cross);
  CHECK(exact.attention.row.tokens == a.row.tokens);
  CHECK(exact.attention.row.source_tokens == a.row.source_tokens);
  CHECK(exact.token_labels == labels);
  CHECK(exact.source_labels == source_labels);
  const CheckpointReader h5((s.dir / "attention_example_1.h5").string());
  CHECK(h5.read_array<uint8_t>("source_padding") == a.row.source_padding);
  CHECK_FALSE(h5.has("gold_alignment"));
  CHECK(exact.gold_alignment.empty());

  // The CSVs alone: the same shapes and labels, values to %.5g.
  fs::remove(s.dir / "attention_example_1.h5");
  const AttentionDump csv = read_attention_dump(s.dir.string(), "1");
  CHECK((csv.attention.cross.n_queries == T && csv.attention.cross.n_keys == S));
  CHECK((csv.attention.encoder.n_queries == S && csv.attention.encoder.n_keys == S));
  CHECK(csv.source_labels == source_labels);
  REQUIRE(csv.attention.cross.probs.size() == a.cross.probs.size());
  for (size_t i = 0; i < a.cross.probs.size(); ++i)
    CHECK(csv.attention.cross.probs[i] == Approx(a.cross.probs[i]).epsilon(1e-4).margin(1e-9));
}

TEST_CASE("a Bible verse's dump carries its gold alignment on the tokens, and reads it back from the .h5 or the CSV",
          "[analysis][alignment]") {
  test::ScratchDir s("attention_dump_gold");
  const std::unique_ptr<TranslationDataset> data = test::bible_fixture_data(s);
  // The val verse Genesis 8:15, "And God spake unto Noah, saying," -> "Y habló Dios á Noé diciendo:":
  // "God" (H0430, source word 1, bytes 4-6) and "Dios" (target word 2, bytes 9-12) are a gold pair.
  const std::span<const int64_t> rows = data->batch_sentences(Split::val, 0);  // all three verses
  int64_t example = 0;
  while (example < static_cast<int64_t>(rows.size()) &&
         data->sentence_origin(Split::val, rows[static_cast<size_t>(example)]) != "Genesis 8:15")
    ++example;
  REQUIRE(example < static_cast<int64_t>(rows.size()));
  const test::VerseDump v = test::verse_dump(*data, example, 11);
  const AttentionExample& a = v.attention;
  const std::vector<uint8_t>& gold = v.gold;
  const int64_t T = a.seq_len, S = a.row.source_len;
  REQUIRE(gold.size() == static_cast<size_t>(T * S));
  for (int64_t t = 8; t <= 12; ++t)  // the rows predicting " Dios" (a space goes with the word after it)
    for (int64_t k = 0; k < S; ++k) {
      INFO("row " << t << ", source token " << k);
      CHECK(gold[t * S + k] == (k >= 3 && k <= 6));  // " God"
    }
  const std::string want = [&] {
    std::string csv = "target_position,source_position\n";
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < S; ++k)
        if (gold[t * S + k]) csv += std::to_string(t) + "," + std::to_string(k) + "\n";
    return csv;
  }();

  write_attention_dump(s.dir.string(), "0", a, *data, -1, "ckpt.h5", "val", gold);
  CHECK(test::read_file(s.dir / "attention_example_0_gold_alignment.csv") == want);
  const CheckpointReader h5((s.dir / "attention_example_0.h5").string());
  CHECK(h5.shape("gold_alignment") == Shape{T, S});
  CHECK(read_attention_dump(s.dir.string(), "0").gold_alignment == gold);
  fs::remove(s.dir / "attention_example_0.h5");
  CHECK(read_attention_dump(s.dir.string(), "0").gold_alignment == gold);
  // A cell outside the maps is one line naming the file.
  s.write("attention_example_0_gold_alignment.csv", "target_position,source_position\n0," + std::to_string(S) + "\n");
  REQUIRE_THROWS_WITH(read_attention_dump(s.dir.string(), "0"),
                      "attention_example_0_gold_alignment.csv: row 1 has (0, " + std::to_string(S) +
                          "), not a cell of the " + std::to_string(T) + " x " + std::to_string(S) + " cross-attention");
}

TEST_CASE("a decoder's dump has no encoder or cross maps and reads as before", "[analysis]") {
  const int64_t T = 8;
  auto data = test::tiny_task(ModelKind::decoder, T);
  Model<double> model(tiny_spec(ModelKind::decoder, 11, 2, 2, T));
  randomize(model, 3);
  const AttentionExample a = attention_example(model, *data, Split::val, 0, 4);
  CHECK((a.encoder.empty() && a.cross.empty()));
  CHECK(example_gold_alignment(*data, Split::val, 0, 4, a.row).empty());
  test::ScratchDir s("attention_dump_decoder");
  write_attention_dump(s.dir.string(), "0", a, *data, -1, "ckpt.h5", "val");
  for (const char* file :
       {"attention_example_0_encoder.csv", "attention_example_0_cross.csv", "attention_example_0_source_tokens.csv"})
    CHECK_FALSE(fs::exists(s.dir / file));
  const CheckpointReader h5((s.dir / "attention_example_0.h5").string());
  CHECK_FALSE(h5.has("encoder_attention"));
  CHECK_FALSE(h5.has("cross_attention"));
  // A hand-written dump in the old CSV form (no kind files) still reads.
  s.write("attention_example_1.csv", "layer,head,query,k0,k1\n0,0,0,1,0\n0,0,1,0.5,0.5\n");
  const AttentionDump old = read_attention_dump(s.dir.string(), "1");
  CHECK((old.attention.n_layers == 1 && old.attention.seq_len == 2 && old.attention.probs[2] == 0.5));
  CHECK((old.attention.encoder.empty() && old.attention.cross.empty() && old.source_labels.empty()));
}
