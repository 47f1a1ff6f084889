// Decoding speed of an encoder_decoder: `sentences` random sources of `source_len` tokens (the
// last one </s>), each decoded to exactly `target_len` target tokens (</s> included) by
// decode/search.h's translate(): min_len bars </s> until the last step, where the length limit
// forces it, so every implementation does the same number of decoder steps whatever the
// (random, untrained) weights predict. All sentences are one chunk (batch_sentences =
// sentences), as bench/torch_ref_seq2seq.py decodes them. Timed: translate() on all sentences,
// `reps` times after `warmup` untimed runs; sentences/s = sentences / median time.
// With cross_heads_removed = k > 0 three models decode the same sentences, one after another in
// every repetition (so drifting machine load hits all three alike): the full model, the model
// with the last k cross-attention heads of every decoder layer masked (gate 0) and the model with
// those heads removed (nn/prune.h: smaller cross projections and cross K/V cache). The masked and
// the removed model must decode the same tokens.
#include "bench_decode.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_machine.h"
#include "headlab/common/error.h"
#include "headlab/common/parallel.h"
#include "headlab/common/timing.h"
#include "headlab/data/batch.h"
#include "headlab/decode/search.h"
#include "headlab/io/provenance.h"
#include "headlab/linalg/gemm.h"
#include "headlab/nn/model.h"
#include "headlab/nn/prune.h"
#include "headlab/train/setup.h"

namespace headlab::cli {

namespace {

// Ids as headlab's sentencepiece models number them (data/tokenizer.h): 0 <pad>, 1 <unk>, 2 <s>, 3 </s>.
constexpr SpecialIds kIds{.bos = 2, .eos = 3, .pad = 0};
constexpr int32_t kFirstPiece = 4;

// Source i: source_len - 1 uniform pieces from RowRng(seed, test, 0, i), then </s>.
std::vector<std::vector<int32_t>> random_sources(int64_t n, int64_t source_len, int64_t vocab, uint64_t seed) {
  std::vector<std::vector<int32_t>> sources(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    RowRng rng(seed, Split::test, 0, i);
    std::vector<int32_t>& s = sources[static_cast<size_t>(i)];
    for (int64_t t = 0; t + 1 < source_len; ++t)
      s.push_back(kFirstPiece + static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab - kFirstPiece))));
    s.push_back(kIds.eos);
  }
  return sources;
}

// The models timed: "full", and with cross_heads_removed > 0 also "masked" and "removed".
struct DecodeVariant {
  std::string name;
  Model<float> model;
};

std::vector<DecodeVariant> decode_variants(const ModelSpec& spec, uint64_t seed, int64_t cross_heads_removed) {
  std::vector<DecodeVariant> variants;
  variants.push_back({"full", Model<float>(spec)});
  variants[0].model.params().init(seed);
  if (cross_heads_removed == 0) return variants;
  HEADLAB_CHECK(cross_heads_removed < spec.cross_n_heads,
                "bench --decode: --cross-heads-removed=" << cross_heads_removed << " must leave at least one of the "
                                                         << spec.cross_n_heads << " cross-attention heads");
  HeadKeepMask off = heads_with_nonzero_gates(variants[0].model);
  for (size_t site = 0; site < off.size(); ++site) {
    const bool cross = spec.attention_sites()[site].kind == AttentionKind::cross;
    for (size_t h = 0; h < off[site].size(); ++h)
      off[site][h] = cross && static_cast<int64_t>(h) >= spec.cross_n_heads - cross_heads_removed;
  }
  variants.push_back({"masked", Model<float>(spec)});
  variants[1].model.params().init(seed);
  switch_off_heads(variants[1].model, off);
  variants.push_back({"removed", prune_heads(variants[1].model, heads_with_nonzero_gates(variants[1].model))});
  return variants;
}

// Each variant's timings of `runs` decodings, alternating variants within every run; checks every
// decoding's length, and that the masked and removed models decode the same tokens.
std::vector<std::vector<double>> time_decodings(std::vector<DecodeVariant>& variants,
                                                const std::vector<std::vector<int32_t>>& sources,
                                                const SearchOptions& search, const DecodeBenchOptions& o, int runs) {
  std::vector<std::vector<double>> times(variants.size());
  for (int i = 0; i < runs; ++i) {
    std::vector<std::vector<std::vector<int32_t>>> outs;
    for (size_t v = 0; v < variants.size(); ++v) {
      const double t0 = wall_seconds();
      outs.push_back(translate(variants[v].model, sources, kIds, search));
      const double t1 = wall_seconds();
      times[v].push_back(t1 - t0);
      int64_t target_tokens = 0;
      for (const std::vector<int32_t>& t : outs.back()) target_tokens += static_cast<int64_t>(t.size()) + 1;  // </s>
      HEADLAB_CHECK(target_tokens == o.sentences * o.target_len,
                    "bench --decode: the " << variants[v].name << " model decoded " << target_tokens
                                           << " target tokens, expected " << o.sentences * o.target_len);
    }
    HEADLAB_CHECK(variants.size() == 1 || outs[1] == outs[2],
                  "bench --decode: the masked and the removed model decoded different tokens");
  }
  return times;
}

// {"full": {...}, "masked": {...}, "removed": {...}} and the sentences/s ratios.
void add_variants_json(JsonObject& json, const std::vector<DecodeVariant>& variants,
                       const std::vector<std::vector<double>>& times, int64_t sentences) {
  JsonObject all;
  std::vector<double> per_s;
  for (size_t v = 0; v < variants.size(); ++v) {
    per_s.push_back(static_cast<double>(sentences) / median(times[v]));
    std::vector<std::string> ms;
    for (double t : times[v]) ms.push_back(json_fixed(t * 1e3, 3));
    JsonObject one;
    one.integer("params", variants[v].model.params().count())
        .raw("ms_median", json_fixed(median(times[v]) * 1e3, 3))
        .raw("ms_all", json_list(ms))
        .raw("sentences_per_s", json_fixed(per_s.back(), 3));
    all.raw(variants[v].name, one.str());
  }
  json.raw("variants", all.str())
      .raw("removed_vs_full", json_fixed(per_s[2] / per_s[0], 4))
      .raw("removed_vs_masked", json_fixed(per_s[2] / per_s[1], 4))
      .raw("masked_vs_full", json_fixed(per_s[1] / per_s[0], 4));
}

}  // namespace

int run_decode_bench(const Config& config, const DecodeBenchOptions& o) {
  const ModelSpec spec = model_spec(config);
  HEADLAB_CHECK(model_kind_info(spec.kind).source,
                "bench --decode: model.kind must be encoder_decoder, got " << model_kind_info(spec.kind).name);
  HEADLAB_CHECK(o.beam >= 1 && o.sentences >= 1 && o.reps >= 1 && o.warmup >= 0 && o.cross_heads_removed >= 0,
                "bench --decode: --beam, --sentences and --reps must be at least 1, --warmup and "
                "--cross-heads-removed at least 0");
  HEADLAB_CHECK(
      o.source_len >= 1 && o.source_len <= spec.max_seq_len && o.target_len >= 1 && o.target_len <= spec.max_seq_len,
      "bench --decode: --source-len and --target-len must be in [1, model.max_seq_len="
          << spec.max_seq_len << "], got " << o.source_len << " and " << o.target_len);
  HEADLAB_CHECK(spec.vocab_size > kFirstPiece, "bench --decode: model.vocab_size must exceed " << kFirstPiece);
  const int threads = resolved_threads(config);
  set_num_threads(threads);
  std::vector<DecodeVariant> variants =
      decode_variants(spec, static_cast<uint64_t>(config.train.seed), o.cross_heads_removed);
  const std::vector<std::vector<int32_t>> sources =
      random_sources(o.sentences, o.source_len, spec.vocab_size, static_cast<uint64_t>(config.data.seed));
  SearchOptions search;
  search.beam = o.beam;
  search.max_len_a = 0.0;
  search.max_len_b = o.target_len;
  search.min_len = o.target_len - 1;
  search.batch_sentences = o.sentences;
  search.use_cache = o.use_cache;

  const std::string load_start = loadavg();
  time_decodings(variants, sources, search, o, o.warmup);
  const MachineSample start = MachineSample::now();
  const std::vector<std::vector<double>> times = time_decodings(variants, sources, search, o, o.reps);
  const MachineSample end = MachineSample::now();
  const int64_t target_tokens = o.sentences * o.target_len;  // time_decodings checked it
  const double med = median(times[0]);
  std::vector<std::string> all;
  for (double t : times[0]) all.push_back(json_fixed(t * 1e3, 3));
  JsonObject config_json;
  config_json.integer("d_model", spec.d_model)
      .integer("n_layers", spec.n_layers)
      .integer("n_encoder_layers", spec.n_encoder_layers)
      .integer("n_heads", spec.n_heads)
      .integer("cross_n_heads", spec.cross_n_heads)
      .integer("vocab_size", spec.vocab_size)
      .integer("beam", o.beam)
      .integer("sentences", o.sentences)
      .integer("source_len", o.source_len)
      .integer("target_len", o.target_len)
      .boolean("cache", o.use_cache)
      .integer("threads", threads)
      .integer("reps", o.reps)
      .integer("warmup", o.warmup)
      .integer("cross_heads_removed", o.cross_heads_removed);
  JsonObject json;
  json.raw("config", config_json.str())
      .text("mode", "decode")
      .text("tag", o.tag)
      .text("headlab", provenance_value("headlab_version"))
      .text("headlab_commit", provenance_value("headlab_commit"))
      .integer("threads", threads)
      .text("blis_kernels", blis_kernel_name())
      .integer("params", variants[0].model.params().count())
      .raw("ms_median", json_fixed(med * 1e3, 3))
      .raw("ms_all", json_list(all))
      .raw("sentences_per_s", json_fixed(static_cast<double>(o.sentences) / med, 3))
      .raw("target_tokens_per_s", json_fixed(static_cast<double>(target_tokens) / med, 1));
  if (variants.size() > 1) add_variants_json(json, variants, times, o.sentences);
  json.raw("peak_rss_mb", json_fixed(peak_rss_mb(), 1)).raw("loadavg_start", load_start);
  add_machine_use(json, start, end);
  std::printf("%s\n", json.str().c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace headlab::cli
