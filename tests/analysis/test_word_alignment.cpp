// Word alignments (analysis/word_alignment.h): gold links from Strong's tags, AER, precision and
// recall against hand-computed values, the diagonal baseline, token -> word maps, the word-level
// argmax of an attention map, the gold alignment on a verse's tokens, and IBM Model 1's EM.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "headlab/analysis/word_alignment.h"
#include "headlab/common/error.h"

using namespace headlab;
using Links = std::vector<AlignmentLink>;

TEST_CASE("gold links join the words that carry a common Strong's number", "[analysis][alignment]") {
  BiblePair pair;
  pair.source = "For God so loved the world";
  pair.target = "Porque de tal manera amó Dios al mundo";
  pair.source_tags = {{1, "G2316"}, {3, "G25"}, {5, "G2889"}, {5, "G3588"}};
  pair.target_tags = {{4, "G25"}, {5, "G2316"}, {7, "G2889"}, {2, "G9999"}};  // G9999: no source word has it
  const Links gold = gold_links(pair);
  CHECK(gold == Links{{1, 5}, {3, 4}, {5, 7}});
  CHECK(aligned_target_words(gold) == std::vector<int>{4, 5, 7});
  pair.target_tags.push_back({6, "G2316"});  // one lemma on two target words: two links
  CHECK(gold_links(pair) == Links{{1, 5}, {1, 6}, {3, 4}, {5, 7}});
}

TEST_CASE("AER, precision and recall are the hand-computed ones, summed over sentences", "[analysis][alignment]") {
  AlignmentCounts c;
  CHECK(std::isnan(c.aer()));
  c.add({{1, 5}, {2, 4}, {2, 4}}, {{1, 5}, {3, 4}});  // the duplicate counts once
  CHECK(c.predicted == 2);
  CHECK(c.correct == 1);
  CHECK(c.precision() == Approx(0.5));
  CHECK(c.recall() == Approx(0.5));
  CHECK(c.aer() == Approx(0.5));  // 1 - 2 * 1 / (2 + 2)
  c.add({{0, 0}}, {{0, 0}, {1, 1}});
  CHECK(c.precision() == Approx(2.0 / 3.0));
  CHECK(c.recall() == Approx(2.0 / 4.0));
  CHECK(c.aer() == Approx(1.0 - 4.0 / 7.0));
  AlignmentCounts perfect;
  perfect.add({{0, 1}, {1, 0}}, {{1, 0}, {0, 1}});
  CHECK(perfect.aer() == 0.0);
}

TEST_CASE("the diagonal baseline maps a target word to the same relative source position", "[analysis][alignment]") {
  CHECK(diagonal_alignment(4, 2, {0, 1}) == Links{{1, 0}, {3, 1}});
  CHECK(diagonal_alignment(3, 3, {0, 1, 2}) == Links{{0, 0}, {1, 1}, {2, 2}});
  CHECK(diagonal_alignment(1, 5, {4}) == Links{{0, 4}});
  CHECK_THROWS_WITH(diagonal_alignment(0, 2, {0}), Catch::Contains("needs words on both sides"));
}

TEST_CASE("token_words maps each token to the word its first byte is in", "[analysis][alignment]") {
  const auto bytes = byte_tokenizer(true);
  std::vector<int32_t> ids = {257};  // <s>
  for (const char c : std::string("ab  c ")) ids.push_back(static_cast<unsigned char>(c));
  ids.push_back(258);  // </s>
  CHECK(token_words(*bytes, ids) == std::vector<int>{-1, 0, 0, 1, 1, 1, -1, -1});
}

TEST_CASE("attention alignment takes the word-level argmax of summed, row-averaged attention",
          "[analysis][alignment]") {
  // Target tokens 0,1 are word 0 and token 2 word 1; source tokens 0 is word 0, tokens 1,2 word 1.
  const std::vector<double> attn = {
      0.6, 0.2, 0.2,  // word 0, token 0: word 0 0.6, word 1 0.4
      0.1, 0.5, 0.4,  // word 0, token 1: word 0 0.1, word 1 0.9  -> means 0.35 vs 0.65: source word 1
      0.5, 0.3, 0.2,  // word 1: 0.5 vs 0.5, a tie: the lower word
  };
  CHECK(attention_alignment(attn.data(), 3, 3, {0, 0, 1}, {0, 1, 1}, 2, {0, 1}) == Links{{1, 0}, {0, 1}});
  CHECK(attention_alignment(attn.data(), 3, 3, {0, 0, 1}, {0, 1, 1}, 2, {1, 2}) == Links{{0, 1}});  // 2: cut off
}

TEST_CASE("the gold alignment on tokens marks the rows predicting a word against its gold source word's tokens",
          "[analysis][alignment]") {
  const auto bytes = byte_tokenizer(true);
  TranslationSentence s;
  s.pair.source = "a Bc d";
  s.pair.target = "X yz";
  s.pair.source_tags = {{0, "H1"}, {1, "H2"}, {2, "H3"}};
  s.pair.target_tags = {{0, "H2"}, {1, "H1"}, {1, "H9"}};  // H3 and H9: no partner
  bytes->encode(s.pair.source, s.source_ids);
  bytes->encode(s.pair.target, s.target_ids);
  const VerseTokenWords words = verse_token_words(*bytes, s);
  // Source row "a", " ", "B", "c", " ", "d", </s>; a space goes with the word after it.
  CHECK(words.source == std::vector<int>{0, 1, 1, 1, 2, 2, -1});
  // Target rows predict "X", " ", "y", "z", </s>.
  CHECK(words.target == std::vector<int>{0, 1, 1, 1, -1});
  CHECK((words.n_source_words == 3 && words.n_target_words == 2));
  // Gold: (source Bc, target X) and (source a, target yz), by hand on a map padded to 6 x 8.
  const std::vector<uint8_t> want = {
      0, 1, 1, 1, 0, 0, 0, 0,  // row 0 predicts X: " ", "B", "c" (Bc)
      1, 0, 0, 0, 0, 0, 0, 0,  // rows 1-3 predict yz's tokens: "a"
      1, 0, 0, 0, 0, 0, 0, 0,  //
      1, 0, 0, 0, 0, 0, 0, 0,  //
      0, 0, 0, 0, 0, 0, 0, 0,  // </s>
      0, 0, 0, 0, 0, 0, 0, 0,  // padding
  };
  CHECK(gold_token_matrix(gold_links(s.pair), words, 6, 8) == want);
  CHECK_THROWS_WITH(gold_token_matrix(gold_links(s.pair), words, 4, 8), Catch::Contains("on a 4 x 8 map"));
  // A verse cut to the caps no longer decodes to its words: no token map, as alignment scoring skips it.
  s.target_ids.resize(2);
  CHECK(verse_token_words(*bytes, s).empty());
}

TEST_CASE("IBM Model 1's likelihood rises every EM iteration and it learns the word pairs", "[analysis][alignment]") {
  const std::vector<IbmModel1::Sentence> corpus = {
      {{"the", "house"}, {"la", "casa"}},
      {{"the", "book"}, {"el", "libro"}},
      {{"a", "book"}, {"un", "libro"}},
      {{"the", "House."}, {"la", "casa"}},
  };
  const IbmModel1 ibm(corpus, 8);
  const std::vector<double>& ll = ibm.log_likelihoods();
  REQUIRE(ll.size() == 9);
  for (size_t k = 1; k < ll.size(); ++k) CHECK(ll[k] > ll[k - 1]);
  CHECK(ibm.probability("libro", "book") > ibm.probability("libro", "the"));
  CHECK(ibm.probability("casa", "house") > ibm.probability("casa", "the"));
  CHECK(ibm.probability("casa", "HOUSE,") == ibm.probability("casa", "house"));  // normalized words
  CHECK(ibm.probability("casa", "unseen") == 0.0);
  CHECK(ibm.align({"the", "book"}, {"el", "libro"}, {1}) == Links{{1, 1}});
  CHECK(ibm.align({"a", "house"}, {"una", "casa"}, {1}) == Links{{1, 1}});
  // t(. | e) is a distribution over the target words for every source word.
  for (const std::string e : {"the", "book", ""}) {
    double sum = 0;
    for (const std::string f : {"la", "casa", "el", "libro", "un"}) sum += ibm.probability(f, e);
    CHECK(sum == Approx(1.0));
  }
}
