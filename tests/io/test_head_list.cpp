// src/io/head_list.cpp: the L:H,... lists of `headlab eval --mask` and `analyze --mask`.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

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

TEST_CASE("heads named by label: KIND.L<layer>H<head> in any model, L<layer>H<head> in one stack", "[io][head_list]") {
  ModelSpec lm = tiny_spec(ModelKind::decoder, 11, 4, 4, 8);
  lm.layer_heads = {2, 4};
  const HeadKeepMask expected{{false, true}, {true, false, false, true}};
  CHECK(parse_head_list("L0H1,dec.L1H3,1:0", lm, "--mask") == expected);
  CHECK_THROWS_WITH(parse_head_list("cross.L0H0", lm, "--mask"),
                    Catch::Equals("--mask: 'cross.L0H0' names a head of kind cross, which this decoder model does not "
                                  "have (its heads are L<layer>H<head>)"));
  CHECK_THROWS_WITH(parse_head_list("L0H1,dec.L0H1", lm, "--mask"),
                    Catch::Equals("--mask: head dec.L0H1 is named twice"));
  CHECK_THROWS_WITH(parse_head_list("dec.L0H2", lm, "--mask"),
                    Catch::Equals("--mask: head 2 in 'dec.L0H2' is outside [0, 2) (dec.L0's heads)"));
  CHECK_THROWS_WITH(parse_head_list("L0H", lm, "--mask"), Catch::Contains("'L0H' is not LAYER:HEAD"));

  // Sites enc.L0, enc.L1, dec.L0, cross.L0, dec.L1, cross.L1 (4, 4, 2, 2, 2, 2 heads).
  const ModelSpec seq2seq = test::tiny_seq2seq_spec(2, 4, 2, 1);
  const HeadKeepMask named = parse_head_list("enc.L1H3,cross.L1H0,dec.L0H1", seq2seq, "--mask");
  const HeadKeepMask want{{false, false, false, false},
                          {false, false, false, true},
                          {false, true},
                          {false, false},
                          {false, false},
                          {true, false}};
  CHECK(named == want);
  for (const auto& [list, message] : std::vector<std::pair<std::string, std::string>>{
           {"1:0",
            "--mask: '1:0' does not say which attention: an encoder_decoder's heads are named "
            "KIND.L<layer>H<head> (e.g. --mask enc.L0H3,cross.L1H2)"},
           {"L1H0", "--mask: 'L1H0' does not say which attention"},
           {"self.L0H0",
            "--mask: 'self.L0H0' is not KIND.L<layer>H<head> (kind enc, dec or cross) (e.g. --mask "
            "enc.L0H3,cross.L1H2)"},
           {"enc.L2H0", "--mask: layer 2 in 'enc.L2H0' is outside [0, 2) (the model's enc layers)"},
           {"cross.L0H2", "--mask: head 2 in 'cross.L0H2' is outside [0, 2) (cross.L0's heads)"},
           {"cross.L0H1,cross.L0H1", "--mask: head cross.L0H1 is named twice"}})
    CHECK_THROWS_WITH(parse_head_list(list, seq2seq, "--mask"), Catch::StartsWith(message));
}
