#include <catch2/catch.hpp>

#include "headlab/io/config.h"
#include "headlab/train/setup.h"

using namespace headlab;

TEST_CASE("the default warm-up is a tenth of the run, at most 100 steps; a given one is kept", "[train]") {
  TrainConfig t;
  REQUIRE(t.warmup_steps == -1);  // the default
  const auto warmup_for = [&](int64_t steps) {
    t.steps = steps;
    return warmup_steps(t);
  };
  CHECK(warmup_for(20) == 2);
  CHECK(warmup_for(5) == 0);
  CHECK(warmup_for(999) == 99);
  CHECK(warmup_for(1000) == 100);  // what the fixed default of 100 gave the default config
  CHECK(warmup_for(50000) == 100);
  t.warmup_steps = 7;
  CHECK(warmup_for(20) == 7);
  Config c;
  c.train.steps = 20;
  CHECK(schedule_options(c).warmup_steps == 2);
}

TEST_CASE("a quick run of the default config is accepted; a given warm-up longer than the run is not", "[train]") {
  CHECK_NOTHROW(parse_config_text("", "<string>", {"train.steps=20"}));
  REQUIRE_THROWS_WITH(parse_config_text("", "<string>", {"train.steps=20", "train.warmup_steps=50"}),
                      Catch::Contains("train.warmup_steps=50 exceeds train.steps=20"));
}
