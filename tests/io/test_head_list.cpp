// src/io/head_list.cpp: the L:H,... lists of `headlab eval --mask` and `analyze --mask`.
#include <catch2/catch.hpp>

#include "headlab/io/head_list.h"
#include "support/tiny_model.h"

using namespace headlab;
using test::tiny_spec;

TEST_CASE("heads named L:H are parsed and checked against the model's layers", "[io][head_list]") {
  ModelSpec spec = tiny_spec(ModelKind::decoder, 11, 4, 4, 8);
  spec.layer_heads = {2, 4};
  CHECK(parse_head_list("0:1,1:3,1:0", spec, "--mask") == HeadKeepMask{{false, true}, {true, false, false, true}});
  CHECK_THROWS_WITH(parse_head_list("0-1", spec, "--mask"),
                    Catch::Equals("--mask: '0-1' is not LAYER:HEAD (e.g. --mask 0:1,1:3)"));
  CHECK_THROWS_WITH(parse_head_list("0:1,", spec, "--mask"), Catch::Contains("'' is not LAYER:HEAD"));
  CHECK_THROWS_WITH(parse_head_list("2:0", spec, "--mask"), Catch::Contains("layer 2 in '2:0' is outside [0, 2)"));
  CHECK_THROWS_WITH(parse_head_list("0:2", spec, "--mask"), Catch::Contains("head 2 in '0:2' is outside [0, 2)"));
  CHECK_THROWS_WITH(parse_head_list("1:1,1:1", spec, "--mask"), Catch::Contains("head 1:1 is named twice"));
  CHECK_THROWS_WITH(parse_head_list("1:1x", spec, "--mask"), Catch::Contains("'1:1x' is not LAYER:HEAD"));
}
