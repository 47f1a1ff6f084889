#include <catch2/catch.hpp>

#include "headlab/data/translation_baselines.h"

using namespace headlab;

namespace {

TranslationSentence sentence(std::string source, std::string target,
                             std::vector<std::pair<int, std::string>> source_tags,
                             std::vector<std::pair<int, std::string>> target_tags) {
  TranslationSentence s;
  s.pair.book = "Mark";
  s.pair.source = std::move(source);
  s.pair.target = std::move(target);
  s.pair.source_tags = std::move(source_tags);
  s.pair.target_tags = std::move(target_tags);
  return s;
}

}  // namespace

TEST_CASE("copy-source translations are the sources", "[data][translation_baselines]") {
  const std::vector<TranslationSentence> s = {sentence("a b.", "x", {}, {}), sentence("c", "y", {}, {})};
  CHECK(copy_source_translations(s) == std::vector<std::string>{"a b.", "c"});
}

TEST_CASE("the Strong's dictionary keeps each lemma's most frequent target phrase", "[data][translation_baselines]") {
  const std::vector<TranslationSentence> train = {
      // G2222 "vida" twice, "vidas" once; G0166 "eterna"; G2400 a two-word run "He aquí," whose
      // comma is stripped; G3588 on two words apart: two phrases, "el" and "la".
      sentence("everlasting life", "vida eterna", {{0, "G0166"}, {1, "G2222"}}, {{0, "G2222"}, {1, "G0166"}}),
      sentence("life", "vida.", {{0, "G2222"}}, {{0, "G2222"}}),
      sentence("lives", "vidas", {{0, "G2222"}}, {{0, "G2222"}}),
      sentence("behold the", "He aquí, el y la", {{0, "G2400"}},
               {{0, "G2400"}, {1, "G2400"}, {2, "G3588"}, {4, "G3588"}}),
  };
  const StrongsDictionary dictionary(train);
  CHECK(dictionary.size() == 4);
  CHECK(*dictionary.phrase("G2222") == "vida");
  CHECK(*dictionary.phrase("G0166") == "eterna");
  CHECK(*dictionary.phrase("G2400") == "He aquí");
  CHECK(*dictionary.phrase("G3588") == "el");  // one "el", one "la": the first in byte order
  CHECK(dictionary.phrase("G9999") == nullptr);

  SECTION("translation follows the source's word order and drops untagged words") {
    // "shall prepare" both carry G2680 (unknown here: dropped); "the" is untagged.
    const TranslationSentence test = sentence("Behold the everlasting life, life.", "",
                                              {{0, "G2400"}, {2, "G0166"}, {3, "G2222"}, {4, "G2222"}}, {});
    // words 3 and 4 carry one lemma: one phrase; the final '.' is kept.
    CHECK(dictionary.translate(test.pair) == "He aquí eterna vida.");
  }
  SECTION("a lemma repeated on non-adjacent words is translated each time") {
    const TranslationSentence test = sentence("life and life", "", {{0, "G2222"}, {2, "G2222"}}, {});
    CHECK(dictionary.translate(test.pair) == "vida vida");
  }
}

TEST_CASE("the Strong's dictionary refuses pairs without tags", "[data][translation_baselines]") {
  const std::vector<TranslationSentence> train = {sentence("a", "b", {}, {})};
  CHECK_THROWS_WITH(StrongsDictionary(train), Catch::Contains("needs Strong's tags"));
}
