// headlab bench CONFIG --decode: decoding speed of an encoder_decoder (see bench_decode.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "headlab/io/config.h"

namespace headlab::cli {

struct DecodeBenchOptions {
  int64_t beam = 5, sentences = 32, source_len = 64, target_len = 128;
  bool use_cache = true;
  int reps = 3, warmup = 1;
  // > 0: also time the full model with this many cross-attention heads per decoder layer masked,
  // and removed (bench_decode.cpp).
  int64_t cross_heads_removed = 0;
  std::string tag;
};

// Prints one JSON line (the keys bench/torch_ref_seq2seq.py --decode prints) and returns 0.
int run_decode_bench(const Config& config, const DecodeBenchOptions& options);

}  // namespace headlab::cli
