// data/bleu.h on hand-worked cases. The counts are worked out in the comments; every expected
// string and score was also printed by sacreBLEU 2.6.0 (Tokenizer13a, BLEU(), CHRF() with their
// defaults), and the scores are the formulas of docs/translation.md evaluated on those counts.
// tests/data/test_bleu_reference.cpp compares random corpora with NLTK.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/data/bleu.h"

using namespace headlab;

TEST_CASE("tokenize_13a splits punctuation as mteval-v13a and sacreBLEU do", "[data][bleu]") {
  struct Case {
    std::string in, out;
  };
  const std::vector<Case> cases = {
      {"Hello, world!", "Hello , world !"},
      {"It costs $3.50, or 3,000 yen.", "It costs $ 3.50 , or 3,000 yen ."},  // '.' ',' kept between digits
      {"1990-2000 x-ray", "1990 - 2000 x-ray"},                               // '-' split only after a digit
      {"5-", "5 -"},
      {"-5", "-5"},
      {"&quot;Hi&quot; &amp; &lt;b&gt;", "\" Hi \" & < b >"},
      {"&amp;quot;", "& quot ;"},  // unescaped once, in sacreBLEU's order
      {"U.S.A.", "U . S . A ."},
      {"don't", "don't"},  // the apostrophe is not in 13a's punctuation class
      {"a..b", "a . . b"},
      {"e.g.,the", "e . g . , the"},
      {"1.5.", "1.5 ."},
      {".5", ". 5"},  // preceded by a non-digit (the padding space)
      {"x.1", "x . 1"},
      {"10,5,", "10,5 ,"},
      {"line-\nbreak", "linebreak"},  // a hyphen at a line end joins the lines
      {"<skipped>word", "word"},
      {"end.\n", "end ."},
      {"(a)[b]{c}", "( a ) [ b ] { c }"},
      {"100%", "100 %"},
      {"a/b\\c", "a / b \\ c"},
      {"~`^_|", "~ ` ^ _ |"},
      {"niño.", "niño ."},  // multi-byte characters next to the rules
      {"café,bar", "café , bar"},
      {"日本語。", "日本語。"},  // non-ASCII punctuation is left alone
      {"«quoted»", "«quoted»"},
      {"a\u00a0b\u3000c", "a b c"},  // Unicode whitespace, as Python's str.split()
      {"a\tb", "a b"},
      {"", ""},
      {"  ", ""},
  };
  for (const Case& c : cases) {
    INFO("input: " << c.in);
    CHECK(tokenize_13a(c.in) == c.out);
  }
}

TEST_CASE("split_words splits on Python's whitespace set", "[data][bleu]") {
  CHECK(split_words("  a\u2003b\u0085c\u001fd \u200be ") == std::vector<std::string>{"a", "b", "c", "d", "\u200be"});
  CHECK(split_words("").empty());
}

TEST_CASE("BLEU of a perfect match is 100 and of no overlap is 0", "[data][bleu]") {
  const BleuScore same = corpus_bleu({"the cat sat on the mat."}, {"the cat sat on the mat."});
  CHECK(same.score == Approx(100).epsilon(1e-12));
  CHECK(same.brevity_penalty == 1.0);
  CHECK(same.counts == std::array<int64_t, 4>{7, 6, 5, 4});  // "." is a token
  CHECK(same.totals == same.counts);
  const BleuScore none = corpus_bleu({"a b c d"}, {"e f g h"});
  CHECK(none.score == 0.0);
  CHECK(none.precisions == std::array<double, 4>{0, 0, 0, 0});
}

TEST_CASE("BLEU's brevity penalty is exp(1 - r/c) for a short hypothesis", "[data][bleu]") {
  // Every n-gram of "the cat sat on" is in the reference: precisions 4/4, 3/3, 2/2, 1/1.
  const BleuScore s = corpus_bleu({"the cat sat on"}, {"the cat sat on the mat"});
  CHECK(s.sys_len == 4);
  CHECK(s.ref_len == 6);
  CHECK(s.brevity_penalty == Approx(std::exp(1 - 6.0 / 4)).epsilon(1e-15));
  CHECK(s.score == Approx(100 * std::exp(-0.5)).epsilon(1e-13));  // sacreBLEU: 60.653065971263366
  // A longer hypothesis has no penalty.
  CHECK(corpus_bleu({"the cat sat on the mat today"}, {"the cat sat on the mat"}).brevity_penalty == 1.0);
}

TEST_CASE("BLEU of a worked two-sentence corpus, with its counts", "[data][bleu]") {
  // 1: "the cat is on the mat" / "the cat sat on the mat"
  //    unigrams the the cat on mat of 6 = 5/6; bigrams "the cat" "on the" "the mat" = 3/5;
  //    trigrams "on the mat" = 1/4; 4-grams 0/3. Lengths 6 and 6.
  // 2: "a dog ran" / "the dog ran away fast"
  //    unigrams dog ran = 2/3; bigrams "dog ran" = 1/2; trigrams 0/1; no 4-grams. Lengths 3 and 5.
  const std::vector<std::string> hyps = {"the cat is on the mat", "a dog ran"};
  const std::vector<std::string> refs = {"the cat sat on the mat", "the dog ran away fast"};
  const auto stats = bleu_sentence_stats(hyps, refs);
  CHECK(stats[0].matches == std::array<int64_t, 4>{5, 3, 1, 0});
  CHECK(stats[0].totals == std::array<int64_t, 4>{6, 5, 4, 3});
  CHECK(stats[1].matches == std::array<int64_t, 4>{2, 1, 0, 0});
  CHECK(stats[1].totals == std::array<int64_t, 4>{3, 2, 1, 0});
  const BleuScore s = corpus_bleu(hyps, refs);
  CHECK(s.counts == std::array<int64_t, 4>{7, 4, 1, 0});
  CHECK(s.totals == std::array<int64_t, 4>{9, 7, 5, 3});
  CHECK(s.sys_len == 9);
  CHECK(s.ref_len == 11);
  // 'exp' smoothing: the first order without a match gets 100 / (2 * 3).
  CHECK(s.precisions[0] == Approx(700.0 / 9).epsilon(1e-15));
  CHECK(s.precisions[1] == Approx(400.0 / 7).epsilon(1e-15));
  CHECK(s.precisions[2] == Approx(20.0).epsilon(1e-15));
  CHECK(s.precisions[3] == Approx(100.0 / 6).epsilon(1e-15));
  CHECK(s.brevity_penalty == Approx(std::exp(1 - 11.0 / 9)).epsilon(1e-15));
  const double expected = std::exp(1 - 11.0 / 9) * std::pow(700.0 / 9 * 400.0 / 7 * 20.0 * 100.0 / 6, 0.25);
  CHECK(s.score == Approx(expected).epsilon(1e-13));
  CHECK(s.score == Approx(27.935996777276866).epsilon(1e-13));  // sacreBLEU's
  // Sentence 2 alone has no 4-gram: precision 0, floored log, score 0 (as sacreBLEU, without
  // effective order).
  const BleuScore second = bleu_from_stats(stats[1]);
  CHECK(second.score == 0.0);
  CHECK(second.precisions[2] == Approx(50.0).epsilon(1e-15));  // 100 / (2 * 1)
  CHECK(second.precisions[3] == 0.0);
}

TEST_CASE("BLEU clips counts to the reference and smooths with 1/2^k", "[data][bleu]") {
  // Seven "the" against a reference with two: unigrams 2/7; bigrams 0/6 -> 100/(2*6); trigrams
  // 0/5 -> 100/(4*5); 4-grams 0/4 -> 100/(8*4). sacreBLEU: 28.6/8.3/5.0/3.1, BLEU 7.81.
  const BleuScore s = corpus_bleu({"the the the the the the the"}, {"the cat is on the mat"});
  CHECK(s.counts == std::array<int64_t, 4>{2, 0, 0, 0});
  CHECK(s.precisions[1] == Approx(100.0 / 12).epsilon(1e-15));
  CHECK(s.precisions[2] == Approx(100.0 / 20).epsilon(1e-15));
  CHECK(s.precisions[3] == Approx(100.0 / 32).epsilon(1e-15));
  CHECK(s.score == Approx(std::pow(200.0 / 7 * 100.0 / 12 * 5.0 * 100.0 / 32, 0.25)).epsilon(1e-13));
}

TEST_CASE("BLEU with several references: largest count, closest length, shorter on a tie", "[data][bleu]") {
  const BleuStats a = bleu_sentence_stats("the cat the", {"the cat sat", "the the dog"});
  CHECK(a.matches[0] == 3);  // "the" twice in the second reference, "cat" in the first
  const BleuStats b = bleu_sentence_stats("a b c d", {"a b c", "a b c d e"});
  CHECK(b.ref_len == 3);  // both differ by 1
  const BleuStats c = bleu_sentence_stats("a b", {"a b c", "x y"});
  CHECK(c.ref_len == 2);
  CHECK_THROWS_AS(bleu_sentence_stats("a", {}), Error);
}

TEST_CASE("BLEU is case-sensitive and tokenizes with 13a unless told not to", "[data][bleu]") {
  CHECK(corpus_bleu({"The Cat"}, {"the cat"}).counts[0] == 0);
  // With 13a "mat." is "mat ." and matches; pre-tokenized, "mat." is one token.
  CHECK(bleu_sentence_stats("on the mat.", {"on the mat ."}).matches[0] == 4);
  CHECK(bleu_sentence_stats("on the mat.", {"on the mat ."}, BleuTokenizer::none).matches[0] == 2);
}

TEST_CASE("chrF of a perfect match is 100, whitespace is removed, no overlap is 0", "[data][bleu]") {
  CHECK(corpus_chrf({"the cat sat"}, {"the cat sat"}).score == Approx(100).epsilon(1e-12));
  CHECK(corpus_chrf({"a b"}, {"ab"}).score == Approx(100).epsilon(1e-12));
  CHECK(corpus_chrf({"xyz"}, {"abc"}).score == 0.0);
}

TEST_CASE("chrF counts code points, not bytes", "[data][bleu]") {
  // "niño" / "nino": four characters each (five and four bytes). Order 1: n i o match, 3 of 4;
  // order 2: "ni", 1 of 3; orders 3 and 4: 0 of 2 and 0 of 1; orders 5 and 6: none on either side.
  // P = R = (3/4 + 1/3) / 4 = 13/48, and so F = 13/48 (sacreBLEU: 27.083333333333332).
  const ChrfStats s = chrf_sentence_stats("niño", {"nino"});
  CHECK(s.hyp == std::array<int64_t, 6>{4, 3, 2, 1, 0, 0});
  CHECK(s.ref == std::array<int64_t, 6>{4, 3, 2, 1, 0, 0});
  CHECK(s.match == std::array<int64_t, 6>{3, 1, 0, 0, 0, 0});
  const ChrfScore f = chrf_from_stats(s);
  CHECK(f.effective_order == 4);
  CHECK(f.precision == Approx(13.0 / 48).epsilon(1e-15));
  CHECK(f.score == Approx(100 * 13.0 / 48).epsilon(1e-14));
  // 4-byte characters are one character too: "😀😀" has one bigram.
  CHECK(chrf_sentence_stats("😀😀", {"😀😀"}).hyp[1] == 1);
  CHECK_THROWS_WITH(chrf_sentence_stats("caf\xc3", {"cafe"}), Catch::Contains("not valid UTF-8"));
  CHECK_THROWS_WITH(corpus_bleu({"ok", "\xff"}, {"ok", "ok"}), Catch::Contains("(sentence 1)"));
}

TEST_CASE("chrF averages precision and recall over the orders both sides have", "[data][bleu]") {
  // "abcd" / "ab": order 1: 2 of 4 hypothesis, 2 of 2 reference characters; order 2: "ab", 1 of 3
  // and 1 of 1; from order 3 on the reference has none, so (as sacreBLEU) the hypothesis's count 0.
  // P = (1/2 + 1/3) / 2 = 5/12, R = 1, F2 = 5PR / (4P + R) = 25/32 (sacreBLEU: 78.12499999999999).
  const ChrfStats s = chrf_sentence_stats("abcd", {"ab"});
  CHECK(s.hyp == std::array<int64_t, 6>{4, 3, 0, 0, 0, 0});
  CHECK(s.ref == std::array<int64_t, 6>{2, 1, 0, 0, 0, 0});
  CHECK(chrf_from_stats(s).score == Approx(100 * 25.0 / 32).epsilon(1e-14));
  // Statistics are summed over the corpus before the F (sacreBLEU: 45.98754099054469).
  const ChrfScore corpus =
      corpus_chrf({"the cat is on the mat", "a dog ran"}, {"the cat sat on the mat", "the dog ran away fast"});
  CHECK(corpus.score == Approx(45.98754099054469).epsilon(1e-13));
}

TEST_CASE("summed sentence statistics of a subset are the statistics of that subset", "[data][bleu]") {
  std::mt19937 rng(7);
  const std::vector<std::string> words = {"the", "cat", "sat", "on", "mat", "a", "dog", "niño", ".", ","};
  std::vector<std::string> hyps, refs;
  for (int i = 0; i < 40; ++i) {
    std::string h, r;
    for (int k = 0; k < 3 + static_cast<int>(rng() % 8); ++k) h += words[rng() % words.size()] + " ";
    for (int k = 0; k < 3 + static_cast<int>(rng() % 8); ++k) r += words[rng() % words.size()] + " ";
    hyps.push_back(h);
    refs.push_back(r);
  }
  const auto bleu = bleu_sentence_stats(hyps, refs);
  const auto chrf = chrf_sentence_stats(hyps, refs);
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<std::size_t> subset;
    std::vector<std::string> sub_hyps, sub_refs;
    for (std::size_t i = 0; i < hyps.size(); ++i) {
      if (rng() % 3 == 0) {
        subset.push_back(i);
        sub_hyps.push_back(hyps[i]);
        sub_refs.push_back(refs[i]);
      }
    }
    CHECK(sum_stats(bleu, subset) == sum_stats(bleu_sentence_stats(sub_hyps, sub_refs)));
    CHECK(sum_stats(chrf, subset) == sum_stats(chrf_sentence_stats(sub_hyps, sub_refs)));
    CHECK(bleu_from_stats(sum_stats(bleu, subset)).score == corpus_bleu(sub_hyps, sub_refs).score);
    CHECK(chrf_from_stats(sum_stats(chrf, subset)).score == corpus_chrf(sub_hyps, sub_refs).score);
  }
  std::vector<std::size_t> all(hyps.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  CHECK(sum_stats(bleu, all) == sum_stats(bleu));
  BleuStats twice = bleu[3];
  twice += bleu[3];
  CHECK(sum_stats(bleu, {3, 3}) == twice);  // a resample's repeats count again
  CHECK(sum_stats(bleu, std::vector<std::size_t>{}) == BleuStats());
  CHECK_THROWS_AS(sum_stats(bleu, {40}), Error);
  CHECK_THROWS_AS(corpus_bleu({"a"}, {"a", "b"}), Error);
}
