// translate_split and translate_lines (decode/translate_split.h) on a tiny random model over small
// parallel files: the scores are corpus BLEU and chrF of the function's own hypotheses, and the
// split and free-text entry points are one search.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "headlab/data/bleu.h"
#include "headlab/data/text.h"
#include "headlab/decode/translate_split.h"
#include "support/tiny_translation.h"

using namespace headlab;

namespace {

struct TinyTranslation : test::TinyTranslation {
  TinyTranslation() : test::TinyTranslation("translate_split", test::tiny_seq2seq_spec(2, 2, 2, 1), 7) {}
};

}  // namespace

TEST_CASE("translate_split's BLEU and chrF are corpus_bleu and corpus_chrf of its own hypotheses", "[decode][bleu]") {
  TinyTranslation t;
  const std::vector<TranslationSentence>& val = t.data.sentences(Split::val);
  for (const int64_t beam : {1, 3}) {
    INFO("beam " << beam);
    const SplitTranslation got = translate_split(t.model, t.data, Split::val, {.beam = beam});
    REQUIRE(got.hypotheses.size() == val.size());
    REQUIRE(got.references.size() == val.size());
    for (size_t i = 0; i < val.size(); ++i) {
      CHECK(got.references[i] == val[i].pair.target);
      CHECK(first_invalid_utf8(got.hypotheses[i]) == -1);
      CHECK(got.hypotheses[i].find('\n') == std::string::npos);
    }
    const BleuScore bleu = corpus_bleu(got.hypotheses, got.references);
    CHECK(got.bleu.score == bleu.score);
    CHECK(got.bleu.counts == bleu.counts);
    CHECK(got.bleu.totals == bleu.totals);
    CHECK(got.bleu.sys_len == bleu.sys_len);
    CHECK(got.bleu.ref_len == bleu.ref_len);
    CHECK(got.bleu.totals[0] > 0);
    CHECK(got.chrf.score == corpus_chrf(got.hypotheses, got.references).score);
    CHECK(got.bleu_stats == bleu_sentence_stats(got.hypotheses, got.references));
    CHECK(got.chrf_stats == chrf_sentence_stats(got.hypotheses, got.references));
  }
}

TEST_CASE("translate_split of the first N sentences and translate_lines of their text agree with the whole split",
          "[decode]") {
  TinyTranslation t;
  const SplitTranslation all = translate_split(t.model, t.data, Split::test, {});
  const SplitTranslation first = translate_split(t.model, t.data, Split::test, {}, 3);
  REQUIRE(first.hypotheses.size() == 3);
  CHECK(first.hypotheses == std::vector<std::string>(all.hypotheses.begin(), all.hypotheses.begin() + 3));
  CHECK(translate_split(t.model, t.data, Split::test, {}, 100000).hypotheses == all.hypotheses);

  // The source text, encoded anew, is the row the dataset batches (these are all short).
  std::vector<std::string> sources;
  for (const TranslationSentence& s : t.data.sentences(Split::test)) sources.push_back(s.pair.source);
  CHECK(translate_lines(t.model, *t.data.tokenizer(), sources, 48, {}) == all.hypotheses);
  // An empty line is an empty translation, not a search over </s> alone; a long one is cut.
  const std::vector<std::string> lines = {"", std::string(500, 'a'), "the light"};
  const std::vector<std::string> out = translate_lines(t.model, *t.data.tokenizer(), lines, 48, {});
  REQUIRE(out.size() == 3);
  CHECK(out[0].empty());
  CHECK(out[1] == translate_lines(t.model, *t.data.tokenizer(), {std::string(47, 'a')}, 48, {})[0]);
}
