#include <catch2/catch.hpp>

#include "headlab/common/edit_distance.h"

using namespace headlab;

TEST_CASE("edit distance counts a substitution as a deletion plus an insertion", "[common]") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("train", "train") == 0);
  CHECK(edit_distance("", "eval") == 4);
  CHECK(edit_distance("n_head", "n_heads") == 1);
  CHECK(edit_distance("n_head", "d_head") == 2);
  CHECK(edit_distance("trian", "train") == 2);  // a swap: one letter out, one in
  CHECK(edit_distance("abc", "xbc") == edit_distance("xbc", "abc"));
}

TEST_CASE("closest_name suggests a near name for a typo and nothing for an unrelated word", "[common]") {
  const std::vector<std::string> verbs = {"train", "eval", "sample", "info", "analyze", "prune"};
  CHECK(closest_name("trian", verbs) == "train");
  CHECK(closest_name("evl", verbs) == "eval");
  CHECK(closest_name("anlyze", verbs) == "analyze");
  CHECK(closest_name("fly", verbs) == "");
  CHECK(closest_name("benchmark", verbs) == "");
  CHECK(closest_name("train", {}) == "");
  CHECK(closest_name("--batch", {"--batches", "--split"}) == "--batches");
}

TEST_CASE("unknown_choice suggests the nearest choice of a typo, and lists the choices otherwise", "[common]") {
  const std::vector<std::string> strategies = {"importance", "importance_raw", "random", "none"};
  CHECK(unknown_choice("strategy", "importnce", strategies) ==
        "unknown strategy 'importnce'; did you mean 'importance'?");
  CHECK(unknown_choice("strategy", "randm", strategies) == "unknown strategy 'randm'; did you mean 'random'?");
  CHECK(unknown_choice("strategy", "magnitude", strategies) ==
        "unknown strategy 'magnitude' (expected importance, importance_raw, random or none)");
  CHECK(unknown_choice("split", "dev", {"val", "test"}) == "unknown split 'dev' (expected val or test)");
  CHECK(unknown_choice("split", "tset", {"val", "test"}) == "unknown split 'tset'; did you mean 'test'?");
  CHECK(unknown_choice("format", "x", {"png"}) == "unknown format 'x' (expected png)");
}
