// The attention statistics of analyze_heads on probability tensors A [B,H,T,T] (rows sum to 1
// over the keys a query sees; [B,H,T,S] for cross-attention: target queries over source keys), summed over batches into
// AttentionSums and divided into a HeadScores by finish_attention_stats (docs/analysis.md defines every column). Tests
// build A by hand; analyze_heads feeds the model's probabilities, batch by batch:
//   AttentionSums sums(scores.n_total());
//   for each batch: accumulate_attention_stats(A_l, scores.index(l, 0), info, sums) for each site l,
//                   accumulate_positional_baselines(info, sums);  (once: they read no head)
//   finish_attention_stats(sums, scores);
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "headlab/analysis/heads.h"

namespace headlab {

// What the statistics read besides A: which query rows count and the optional gold fields, all
// [B,T] and row-major; any pointer may be null (null query_rows = every row counts).
struct AttentionBatchInfo {
  int64_t batch_size = 0, seq_len = 0;
  // Keys from another sequence of this many positions (cross-attention: the S source tokens), or
  // 0: the queries' own. Positions t and s of two sequences do not compare, and the gold fields
  // and tokens describe the queries' sequence, so with other keys only entropy and confidence
  // are counted (causal is then ignored: padded keys hold 0 and add nothing).
  int64_t key_len = 0;
  bool causal = true;
  const uint8_t* query_rows = nullptr;   // 1 = average over this query row
  const uint8_t* key_padding = nullptr;  // 1 = real token
  const int32_t* gold_head = nullptr;
  const int32_t* gold_antecedent = nullptr;
  const uint8_t* is_delimiter = nullptr;
  // For rare_token_agreement: the token ids [B,T] and each id's count in the training split
  // (token_counts[id], id < vocab_size; Dataset::train_token_counts). Null = not measured.
  const int32_t* tokens = nullptr;
  const int64_t* token_counts = nullptr;
  int64_t vocab_size = 0;
};

// Rows counted at each relative offset t - s (t the query row, s the key).
using OffsetRows = std::map<int64_t, int64_t>;

// Running sums over batches, one slot per head (size N); finish_attention_stats() divides.
struct AttentionSums {
  std::vector<double> rows, entropy, distance, confidence, delimiter_mass;
  std::vector<double> positioned;  // rows over the queries' own keys: distance and offsets average over these
  std::vector<int64_t> previous_n, previous_hit, head_n, head_hit, dependent_n, dependent_hit, antecedent_n,
      antecedent_hit, delimiter_n, delimiter_hit, rare_n, rare_hit;
  std::vector<OffsetRows> argmax_offsets;  // per head: rows whose argmax is at t - offset
  std::vector<double> js_sum;              // [N, N]
  std::vector<int64_t> js_pair_rows;       // [N, N] rows each pair was compared on (0: never, other kinds)
  int64_t js_rows = 0;                     // rows compared, over all calls
  // Per relation (not per head): the rows its agreement counts, where its key sits, and the
  // chance a uniform head hits it.
  struct Relation {
    int64_t rows = 0;
    OffsetRows key_offsets;  // rows with a key of the relation at t - offset (dependents, rare tokens: several)
    double chance = 0;       // sum over rows of (visible keys of the relation) / (visible keys)
  };
  Relation syntactic_head, dependent, antecedent, rare_token;
  explicit AttentionSums(int64_t n_total_heads = 0);
};

// Adds one site's probabilities A [B,H,T,T] ([B,H,T,key_len] with key_len; rows sum to 1 over
// visible keys) into slots first_slot .. first_slot + H-1 (first_slot = HeadScores::index(site, 0)).
template <typename T>
void accumulate_attention_stats(const Tensor<T>& probs, int64_t first_slot, const AttentionBatchInfo& info,
                                AttentionSums& sums);
// Adds the batch's gold relations and rare tokens to the positional baselines and chances: call
// once per batch, not per layer, with the info of HeadScores::baseline_kind's heads.
void accumulate_positional_baselines(const AttentionBatchInfo& info, AttentionSums& sums);
// Adds the JS distance of every pair of heads among `probs` (sites whose maps share queries and
// keys: probs[l] is one site's A, sites may differ in H) on each counted query row. Site l's
// head h sits in slot first_slots[l] + h; no first_slots = slots 0, 1, ... site by site.
template <typename T>
void accumulate_js_distance(const std::vector<Tensor<T>>& probs, const AttentionBatchInfo& info, AttentionSums& sums,
                            const std::vector<int64_t>& first_slots = {});
// Means into scores' attention columns, js_nearest and the positional baselines (NaN where
// nothing was counted) and js_distance (NaN for pairs never compared; left empty when no JS rows
// were added).
void finish_attention_stats(const AttentionSums& sums, HeadScores& scores);

// Jensen-Shannon distance sqrt(JSD) with base-2 logs, in [0, 1], of two distributions over n.
template <typename T>
double js_distance(const T* p, const T* q, int64_t n);

}  // namespace headlab
