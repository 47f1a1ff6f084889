#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/data/tokenizer.h"

using namespace headlab;

namespace {

// Seeded verses in the King James style: words, commas, colons, a full stop per verse.
std::vector<std::string> kjv_like_lines(int n, uint64_t seed) {
  static const char* words[] = {"And",   "God",      "said",   "Let",    "there", "be",     "light",  "and",  "was",
                                "the",   "earth",    "waters", "heaven", "upon",  "face",   "of",     "deep", "unto",
                                "him",   "them",     "his",    "Lord",   "shall", "thou",   "thy",    "that", "which",
                                "came",  "to",       "pass",   "in",     "those", "days",   "Israel", "king", "people",
                                "house", "children", "hath",   "spake",  "Moses", "saying", "behold", "I",    "am"};
  std::mt19937_64 rng(seed);
  std::vector<std::string> lines;
  for (int i = 0; i < n; ++i) {
    std::string line;
    const int length = 4 + static_cast<int>(rng() % 14);
    for (int w = 0; w < length; ++w) {
      if (w > 0) line += rng() % 9 == 0 ? ", " : (rng() % 23 == 0 ? ": " : " ");
      line += words[rng() % std::size(words)];
    }
    lines.push_back(line + ".");
  }
  return lines;
}

TokenizerOptions sentencepiece_options(int64_t vocab_size, const std::string& model_type = "unigram") {
  return {.kind = "sentencepiece", .vocab_size = vocab_size, .model_type = model_type};
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

}  // namespace

TEST_CASE("the byte tokenizer maps bytes to ids and back, with specials above 255", "[data][tokenizer]") {
  const auto plain = make_tokenizer({});
  CHECK(std::string(plain->kind()) == "bytes");
  CHECK(plain->vocab_size() == 256);
  CHECK(plain->specials().bos == -1);
  const std::string text("In the\nbeginning \xff\x01", 18);
  std::vector<int32_t> ids;
  plain->encode(text, ids);
  REQUIRE(ids.size() == text.size());
  CHECK(ids[0] == 'I');
  CHECK(ids[17] == 255);
  CHECK(plain->decode(ids) == text);
  CHECK(plain->token_label('\n') == "\\n");
  CHECK_THROWS_AS(plain->decode(std::vector<int32_t>{256}), Error);

  const auto specials = byte_tokenizer(true);
  CHECK(specials->vocab_size() == 259);
  const SpecialTokens s = specials->specials();
  CHECK((s.pad == 256 && s.bos == 257 && s.eos == 258 && s.unk == -1));
  CHECK(specials->decode(std::vector<int32_t>{257, 'h', 'i', 258, 256}) == "hi");  // specials dropped
  CHECK(specials->token_label(258) == "</s>");
  for (const auto* t : {plain.get(), specials.get()}) {
    const auto again = load_tokenizer(t->kind(), t->serialized(), "test");
    CHECK(again->vocab_size() == t->vocab_size());
  }
  CHECK_THROWS_WITH(load_tokenizer("bytes", "words", "ckpt.h5"), Catch::Contains("ckpt.h5"));
  CHECK_THROWS_WITH(load_tokenizer("wordpiece", "", "ckpt.h5"), Catch::Contains("unknown tokenizer kind"));
}

TEST_CASE("sentencepiece training is deterministic and round-trips its text", "[data][tokenizer]") {
  const std::vector<std::string> lines = kjv_like_lines(300, 1);
  for (const std::string model_type : {"unigram", "bpe"}) {
    INFO(model_type);
    const auto a = make_tokenizer(sentencepiece_options(120, model_type), lines);
    const auto b = make_tokenizer(sentencepiece_options(120, model_type), lines);
    CHECK(a->serialized() == b->serialized());
    CHECK(std::string(a->kind()) == "sentencepiece");
    CHECK(a->vocab_size() == 120);
    const SpecialTokens s = a->specials();
    CHECK((s.pad == 0 && s.unk == 1 && s.bos == 2 && s.eos == 3));
    CHECK(a->token_label(0) == "<pad>");
    CHECK(a->token_label(3) == "</s>");

    // Unseen verses of the same words, newlines and runs of spaces included.
    const std::string text = joined(kjv_like_lines(50, 2)) + "  And  God said,\n\n the end.";
    std::vector<int32_t> ids;
    a->encode(text, ids);
    CHECK(ids.size() < text.size() / 2);  // subwords, not characters
    CHECK(a->decode(ids) == text);
    for (int32_t id : ids) CHECK((id >= 4 && id < a->vocab_size()));
    // Token by token, the pieces decode to the same text (headlab sample prints them so).
    std::string piece_by_piece;
    for (int32_t id : ids) piece_by_piece += a->decode(&id, 1);
    CHECK(piece_by_piece == text);
    // The newline is its own piece.
    std::vector<int32_t> newline;
    a->encode("\n", newline);
    REQUIRE(newline.size() == 1);
    CHECK(a->token_label(newline[0]) == "\\n");

    const auto loaded = load_tokenizer("sentencepiece", a->serialized(), "test");
    std::vector<int32_t> again;
    loaded->encode(text, again);
    CHECK(again == ids);
    CHECK(loaded->serialized() == a->serialized());
  }
  const auto unigram = make_tokenizer(sentencepiece_options(120), lines);
  const auto bpe = make_tokenizer(sentencepiece_options(120, "bpe"), lines);
  CHECK(unigram->serialized() != bpe->serialized());
}

TEST_CASE("sentencepiece: characters it never saw decode as the unknown piece", "[data][tokenizer]") {
  const auto t = make_tokenizer(sentencepiece_options(60), kjv_like_lines(100, 3));
  std::vector<int32_t> ids;
  t->encode("God 7", ids);
  REQUIRE(!ids.empty());
  CHECK(ids.back() == t->specials().unk);
  CHECK(t->decode(ids) == "God  \xe2\x81\x87 ");  // sentencepiece's " ⁇ "
  CHECK_THROWS_WITH(t->decode(std::vector<int32_t>{60}), Catch::Contains("outside [0, 60)"));
  CHECK_THROWS_AS(t->token_label(-1), Error);
}

TEST_CASE("sentencepiece refuses a vocabulary it cannot make, saying what to set", "[data][tokenizer]") {
  const std::vector<std::string> lines = kjv_like_lines(100, 4);
  CHECK_THROWS_WITH(make_tokenizer(sentencepiece_options(7), lines), Catch::Contains("at least 8"));
  for (const std::string model_type : {"unigram", "bpe"}) {
    try {
      make_tokenizer(sentencepiece_options(5000, model_type), lines);
      FAIL("no error");
    } catch (const Error& e) {
      const std::string what = e.what();
      INFO(what);
      CHECK_THAT(what,
                 Catch::StartsWith("data.vocab_size=5000 is more than") && Catch::Contains("lower it to at most"));
      CHECK(what.find('\n') == std::string::npos);
      // The size it names trains.
      const int64_t at_most = std::atoll(what.substr(what.rfind(' ') + 1).c_str());
      CHECK(make_tokenizer(sentencepiece_options(at_most, model_type), lines)->vocab_size() == at_most);
    }
  }
  // 30-odd distinct characters do not fit in 8 pieces.
  CHECK_THROWS_WITH(make_tokenizer(sentencepiece_options(8), lines),
                    Catch::Contains("too small") && Catch::Contains("raise it to at least"));
  CHECK_THROWS_WITH(make_tokenizer(sentencepiece_options(60, "word"), lines), Catch::Contains("unigram|bpe"));
  CHECK_THROWS_WITH(make_tokenizer(sentencepiece_options(60), {"", ""}), Catch::Contains("no training text"));
}

TEST_CASE("a corrupt sentencepiece model is one error naming where it came from", "[data][tokenizer]") {
  const std::string model = make_tokenizer(sentencepiece_options(60), kjv_like_lines(100, 5))->serialized();
  // The error loading `bytes`, or "" when they load (and then encode and decode without a crash).
  auto message = [](const std::string& bytes) -> std::string {
    try {
      const auto t = load_tokenizer("sentencepiece", bytes, "runs/x/tokenizer.model");
      std::vector<int32_t> ids;
      t->encode("And God said, Let there be light.\n", ids);
      t->decode(ids);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  CHECK_THAT(message(""), Catch::Contains("runs/x/tokenizer.model: corrupt sentencepiece tokenizer model"));
  CHECK_THAT(message("not a model"), Catch::Contains("runs/x/tokenizer.model"));
  CHECK_THAT(message(model.substr(0, model.size() / 2)), Catch::Contains("runs/x/tokenizer.model"));
  std::mt19937_64 rng(9);
  int refused = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes = model;
    for (int flips = 0; flips < 3; ++flips) bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
    const std::string why = message(bytes);  // an error or a model, never a crash
    refused += !why.empty();
    if (!why.empty()) CHECK(why.find('\n') == std::string::npos);
  }
  CHECK(refused > 0);
}

// tests/fuzz/corpus/fuzz_tokenizer_model: a unigram and a BPE model, as runs store them.
const std::filesystem::path kFuzzSeeds =
    std::filesystem::path(HEADLAB_SOURCE_DIR) / "tests/fuzz/corpus/fuzz_tokenizer_model";

TEST_CASE("writes the fuzz_tokenizer_model seed corpus", "[.make_fuzz_seeds]") {
  std::filesystem::create_directories(kFuzzSeeds);
  for (const std::string model_type : {"unigram", "bpe"}) {
    const std::string bytes =
        make_tokenizer(sentencepiece_options(60, model_type), kjv_like_lines(100, 6))->serialized();
    std::ofstream(kFuzzSeeds / (model_type + "_60.model"), std::ios::binary).write(bytes.data(), bytes.size());
  }
}

TEST_CASE("the committed fuzz seeds are models this build loads", "[data][tokenizer]") {
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kFuzzSeeds)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(entry.path().string());
    CHECK(load_tokenizer("sentencepiece", bytes, entry.path().string())->vocab_size() == 60);
    ++seeds;
  }
  CHECK(seeds == 2);
}
