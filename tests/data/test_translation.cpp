#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/data/task_registry.h"
#include "headlab/data/translation.h"
#include "headlab/io/config.h"
#include "headlab/train/setup.h"
#include "support/alloc_counter.h"
#include "support/scratch.h"
#include "support/skip.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

// The byte tokenizer with specials: id = byte, then these.
constexpr int32_t kPad = 256, kBos = 257, kEos = 258;

// `n` line pairs of varied length (1 to 12 words a side), every source different.
void write_pairs(const test::ScratchDir& s, int n) {
  static const char* words[] = {"in", "the", "beginning", "was", "word", "and", "light", "dark", "water", "earth"};
  std::string source, target;
  for (int i = 0; i < n; ++i) {
    source += concat("s", i);
    target += concat("t", i);
    for (int w = 0; w < (i * 7) % 12; ++w) source += concat(" ", words[(i + w) % 10]);
    for (int w = 0; w < (i * 5) % 12; ++w) target += concat(" ", words[(i * 3 + w) % 10]);
    source += "\n";
    target += "\n";
  }
  s.write("src.txt", source);
  s.write("tgt.txt", target);
}

TranslationOptions file_options(const test::ScratchDir& s) {
  TranslationOptions o;
  o.path = (s.dir / "src.txt").string();
  o.target_path = (s.dir / "tgt.txt").string();
  o.seq_len = 64;
  o.batch_tokens = 256;
  return o;
}

std::vector<int32_t> bytes_of(const std::string& text) {
  return std::vector<int32_t>(text.begin(), text.end());
}

template <typename T>
std::vector<T> row_of(const std::vector<T>& field, int64_t row, int64_t width) {
  return std::vector<T>(field.begin() + row * width, field.begin() + (row + 1) * width);
}

void require_same(const Batch& a, const Batch& b) {
  REQUIRE(BatchShape{a.batch_size, a.seq_len, a.source_len} == BatchShape{b.batch_size, b.seq_len, b.source_len});
  CHECK(a.tokens == b.tokens);
  CHECK(a.targets == b.targets);
  CHECK(a.key_padding == b.key_padding);
  CHECK(a.source_tokens == b.source_tokens);
  CHECK(a.source_padding == b.source_padding);
}

}  // namespace

TEST_CASE("translation rows are <s> target / target </s> / source </s>, padded with <pad>", "[data][translation]") {
  test::ScratchDir s("translation-layout");
  // 8 pairs after the empty one: 5 train (0.625), 1 val (0.125), 2 test.
  s.write("src.txt", "s0\ns1\ns2\n\ns3\ns4\nhi\na\nbcd\n");
  s.write("tgt.txt", "t0\nt1\nt2\n \nt3\nt4\nhola\nwxyz\nq\n");
  TranslationOptions o = file_options(s);
  o.train_fraction = 0.625;
  o.val_fraction = 0.125;
  const TranslationDataset data(o);
  CHECK(data.counts().empty_pairs == 1);
  CHECK(data.counts().sentences[0] == 5);
  CHECK(data.vocab_size() == 259);
  CHECK(data.sentence_origin(Split::val, 0) == o.path + ":7");  // the empty pair is line 4

  Batch b = data.make_batch(1);
  data.fill_batch(Split::val, 0, b);  // "hi" -> "hola"
  REQUIRE(BatchShape{b.batch_size, b.seq_len, b.source_len} == BatchShape{1, 5, 3});
  CHECK(b.source_tokens == std::vector<int32_t>{'h', 'i', kEos});
  CHECK(b.source_padding == std::vector<uint8_t>{1, 1, 1});
  CHECK(b.tokens == std::vector<int32_t>{kBos, 'h', 'o', 'l', 'a'});
  CHECK(b.targets == std::vector<int32_t>{'h', 'o', 'l', 'a', kEos});
  CHECK(b.key_padding == std::vector<uint8_t>{1, 1, 1, 1, 1});

  // "a" -> "wxyz" (longest side 5) and "bcd" -> "q" (4): shorter first, both padded to S=4, T=5.
  REQUIRE(data.eval_batches(Split::test, 16) == 1);
  data.fill_batch(Split::test, 0, b);
  REQUIRE(BatchShape{b.batch_size, b.seq_len, b.source_len} == BatchShape{2, 5, 4});
  const std::vector<int64_t> rows(data.batch_sentences(Split::test, 0).begin(),
                                  data.batch_sentences(Split::test, 0).end());
  CHECK(rows == std::vector<int64_t>{1, 0});
  CHECK(row_of(b.source_tokens, 0, 4) == std::vector<int32_t>{'b', 'c', 'd', kEos});
  CHECK(row_of(b.source_padding, 0, 4) == std::vector<uint8_t>{1, 1, 1, 1});
  CHECK(row_of(b.tokens, 0, 5) == std::vector<int32_t>{kBos, 'q', kPad, kPad, kPad});
  CHECK(row_of(b.targets, 0, 5) == std::vector<int32_t>{'q', kEos, -1, -1, -1});
  CHECK(row_of(b.key_padding, 0, 5) == std::vector<uint8_t>{1, 1, 0, 0, 0});
  CHECK(row_of(b.source_tokens, 1, 4) == std::vector<int32_t>{'a', kEos, kPad, kPad});
  CHECK(row_of(b.source_padding, 1, 4) == std::vector<uint8_t>{1, 1, 0, 0});
  CHECK(row_of(b.tokens, 1, 5) == std::vector<int32_t>{kBos, 'w', 'x', 'y', 'z'});
  CHECK(row_of(b.targets, 1, 5) == std::vector<int32_t>{'w', 'x', 'y', 'z', kEos});
  CHECK(row_of(b.key_padding, 1, 5) == std::vector<uint8_t>{1, 1, 1, 1, 1});
  CHECK(data.sentences(Split::test)[0].source_ids == bytes_of("a"));
}

TEST_CASE("translation batches are pure functions of seed, split and index, within the token budget",
          "[data][translation]") {
  test::ScratchDir s("translation-batches");
  write_pairs(s, 400);
  const TranslationOptions o = file_options(s);
  const TranslationDataset a(o), b(o);
  const int64_t n = a.counts().batches[0];
  REQUIRE(n > 4);
  Batch x = a.make_batch(0), y = a.make_batch(0), z = b.make_batch(0);
  const BatchShape capacity = a.batch_capacity(0);
  for (int64_t i : {int64_t{0}, int64_t{3}, n - 1, n, 2 * n + 5}) {
    INFO("batch " << i);
    a.fill_batch(Split::train, i, x);
    a.fill_batch(Split::train, 7, y);  // another batch in between, into another buffer
    a.fill_batch(Split::train, i, y);
    b.fill_batch(Split::train, i, z);
    require_same(x, y);
    require_same(x, z);
  }
  const int64_t before = test::heap_allocations();
  for (Split split : {Split::train, Split::val, Split::test}) {
    const int64_t batches = split == Split::train ? 3 * n : a.eval_batches(split, 1);
    for (int64_t i = 0; i < batches; ++i) {
      a.fill_batch(split, i, x);
      CHECK(x.batch_size * std::max(x.seq_len, x.source_len) <= o.batch_tokens);
      CHECK(x.batch_size <= capacity.batch_size);
      // Padded no further than the batch's longest row on each side.
      int64_t longest_t = 0, longest_s = 0;
      for (int64_t r = 0; r < x.batch_size; ++r) {
        for (int64_t t = 0; t < x.seq_len; ++t)
          longest_t = std::max(longest_t, x.key_padding[r * x.seq_len + t] ? t + 1 : 0);
        for (int64_t t = 0; t < x.source_len; ++t)
          longest_s = std::max(longest_s, x.source_padding[r * x.source_len + t] ? t + 1 : 0);
      }
      CHECK(longest_t == x.seq_len);
      CHECK(longest_s == x.source_len);
    }
  }
  CHECK(test::heap_allocations() == before);  // reshape stays within make_batch's capacity

  TranslationOptions other = o;
  other.seed = 1;
  const TranslationDataset c(other);
  Batch w = c.make_batch(0);
  a.fill_batch(Split::train, 0, x);
  c.fill_batch(Split::train, 0, w);
  CHECK((x.tokens != w.tokens || x.source_tokens != w.source_tokens));
  a.fill_batch(Split::val, 0, x);  // val does not depend on the seed
  c.fill_batch(Split::val, 0, w);
  require_same(x, w);
}

TEST_CASE("each translation epoch visits every training pair once, in a new batch order", "[data][translation]") {
  test::ScratchDir s("translation-epochs");
  write_pairs(s, 300);
  const TranslationDataset data(file_options(s));
  const int64_t n = data.counts().batches[0];
  const auto pairs = static_cast<int64_t>(data.sentences(Split::train).size());
  std::vector<int64_t> first_of_batch[2];
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> seen;
    for (int64_t i = epoch * n; i < (epoch + 1) * n; ++i) {
      const auto rows = data.batch_sentences(Split::train, i);
      seen.insert(seen.end(), rows.begin(), rows.end());
      first_of_batch[epoch].push_back(rows[0]);
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> all(static_cast<size_t>(pairs));
    for (int64_t k = 0; k < pairs; ++k) all[static_cast<size_t>(k)] = k;
    CHECK(seen == all);
  }
  CHECK(first_of_batch[0] != first_of_batch[1]);
}

TEST_CASE("translation val and test hold every pair exactly once, long ones truncated", "[data][translation]") {
  test::ScratchDir s("translation-eval");
  write_pairs(s, 400);
  TranslationOptions o = file_options(s);
  o.seq_len = 24;  // some pairs are longer: dropped from train, truncated in val and test
  o.source_len = 32;
  o.batch_tokens = 100;
  const TranslationDataset data(o);
  CHECK(data.counts().too_long_dropped > 0);
  CHECK(data.counts().truncated[1] + data.counts().truncated[2] > 0);
  CHECK(data.counts().sentences[1] == 20);  // 400 * 0.05, none dropped
  Batch b = data.make_batch(0);
  for (Split split : {Split::val, Split::test}) {
    std::multiset<int64_t> seen;
    for (int64_t i = 0; i < data.eval_batches(split, 1); ++i) {
      data.fill_batch(split, i, b);
      CHECK(b.seq_len <= 24);
      CHECK(b.source_len <= 32);
      const auto rows = data.batch_sentences(split, i);
      REQUIRE(static_cast<int64_t>(rows.size()) == b.batch_size);
      seen.insert(rows.begin(), rows.end());
    }
    CHECK(seen.size() == data.sentences(split).size());
    CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == seen.size());
    CHECK_THROWS_WITH(data.fill_batch(split, data.eval_batches(split, 1), b), Catch::Contains("outside the split"));
    // Example e is sentence e in corpus order, wherever the length-sorted batches put it; the
    // batch size plays no part (the batches are cut by the token budget).
    const auto n = static_cast<int64_t>(data.sentences(split).size());
    for (int64_t e = 0; e < n; ++e) {
      const Dataset::ExamplePosition at = data.example_position(split, e, 7);
      CHECK(data.batch_sentences(split, at.batch)[static_cast<size_t>(at.row)] == e);
    }
    CHECK_THROWS_WITH(data.example_position(split, n, 7), "example 20 is outside the " +
                                                              std::string(split_name(split)) +
                                                              " split (0 .. 19, its sentences in corpus order)");
  }
  for (const TranslationSentence& t : data.sentences(Split::train)) {
    CHECK(static_cast<int64_t>(t.target_ids.size()) + 1 <= 24);
    CHECK(static_cast<int64_t>(t.source_ids.size()) + 1 <= 32);
  }
  // Token counts: every source and target id, one <s> and one </s> per training pair.
  const std::vector<int64_t> counts = data.train_token_counts();
  CHECK(counts[kBos] == data.counts().sentences[0]);
  CHECK(counts[kPad] == 0);
}

TEST_CASE("parallel files: bad input is one line naming the files", "[data][translation]") {
  CHECK_THROWS_WITH(parse_parallel_lines("a\nb\nc\n", "x\ny\n", "a.en", "a.es"),
                    "translate: a.en has 3 lines but a.es has 2 (data.path and data.target_path must be line-aligned)");
  CHECK_THROWS_WITH(parse_parallel_lines("a\nb\xff\n", "x\ny\n", "a.en", "a.es"),
                    "translate: a.en:2 is not UTF-8 text (byte 0xFF at column 2)");
  CHECK_THROWS_WITH(parse_parallel_lines("a\nb\n", std::string("x\n\0y\n", 5), "a.en", "a.es"),
                    "translate: a.es:2 holds a NUL byte at column 1");
  // CRLF line ends, a last line without one, and pairs with an empty side.
  const ParallelLines lines = parse_parallel_lines("a\r\n\nc\n d", "x\r\ny\n\t\nw", "a.en", "a.es");
  CHECK(lines.lines == 4);
  CHECK(lines.empty_pairs == 2);
  REQUIRE(lines.pairs.size() == 2);
  CHECK((lines.pairs[0].line == 1 && lines.pairs[0].source == "a" && lines.pairs[0].target == "x"));
  CHECK((lines.pairs[1].line == 4 && lines.pairs[1].source == " d" && lines.pairs[1].target == "w"));

  test::ScratchDir s("translation-bad");
  s.write("src.txt", "a\n");
  CHECK_THROWS_WITH(read_parallel_files((s.dir / "src.txt").string(), (s.dir / "none.txt").string()),
                    "translate: no such file: " + (s.dir / "none.txt").string() + " (data.target_path)");
  s.write("tgt.txt", "x\n");
  TranslationOptions o = file_options(s);
  CHECK_THROWS_WITH(TranslationDataset(o),
                    Catch::Contains("the train split of translate:") && Catch::Contains("has no usable pair (0 found"));
  write_pairs(s, 50);
  o.batch_tokens = 63;
  CHECK_THROWS_WITH(TranslationDataset(o),
                    "translate: data.batch_tokens=63 cannot hold one row of the longest pair "
                    "allowed (data.seq_len=64, data.source_len=64)");
}

TEST_CASE("data.task=translate: the config checks its keys against the model and each other", "[data][translation]") {
  Config c;
  c.data.task = "translate";
  CHECK_THROWS_WITH(validate(c), Catch::Contains("data.task=translate needs model.kind=encoder_decoder"));
  c.model.kind = "encoder_decoder";
  c.model.vocab_size = 259;
  CHECK_NOTHROW(validate(c));
  c.data.batch_tokens = 100;
  CHECK_THROWS_WITH(validate(c), Catch::Contains("data.batch_tokens=100 cannot hold one row"));
  c.data.batch_tokens = 3000;
  c.data.source_len = 512;
  CHECK_THROWS_WITH(validate(c), "data.source_len=512 exceeds model.max_seq_len=256");
  c.data.source_len = 0;
  c.data.target_path = "corpus.es";
  CHECK_THROWS_WITH(validate(c), Catch::Contains("data.target_path=corpus.es is for a source file"));
  c.data.path = "corpus.en";
  CHECK_NOTHROW(validate(c));
  c.data.target_path = "";
  CHECK_THROWS_WITH(validate(c), Catch::Contains("needs data.target_path"));
}

TEST_CASE("data.task=translate on the Bible: the default modules and books build a dataset", "[data][translation]") {
  if (std::system("command -v diatheke > /dev/null 2>&1") != 0) {
    SKIP_FOR_MISSING_PACKAGE("diatheke is not installed: apt-get install diatheke sword-text-kjv sword-text-sparv");
    return;
  }
  Config c;
  c.data.task = "translate";
  c.model.kind = "encoder_decoder";
  c.model.vocab_size = 259;
  validate(c);
  const std::unique_ptr<Dataset> dataset = make_dataset(c);
  const auto& data = dynamic_cast<const TranslationDataset&>(*dataset);
  CHECK(data.name() == "translate:bible-engKJV2006eb-spaRV1909eb");
  const TranslationCounts& n = data.counts();
  // datasets/README.md's counts of the export: 30,321 / 85 / 674 pairs. Bytes make long rows, so
  // at data.seq_len = 128 about half the training verses are dropped; val and test keep all.
  CHECK(n.sentences[0] + n.too_long_dropped == 30321);
  CHECK(n.sentences[0] > 10000);
  CHECK(n.sentences[1] == 85);
  CHECK(n.sentences[2] == 674);
  CHECK(n.truncated[2] > 0);
  CHECK(data.sentence_origin(Split::val, 0) == "Ruth 1:1");
  const TranslationSentence& first = data.sentences(Split::val)[0];
  CHECK(first.pair.source.rfind("Now it came to pass", 0) == 0);
  CHECK_FALSE(first.pair.source_tags.empty());  // Strong's numbers, for the alignment analysis
  CHECK(data.eval_batches(Split::val, 1) > 0);
}
