// What each query row of a batch can be scored against, found once per batch and read by both the
// heads' agreements (attention_stats.cpp) and the positional baselines (gold_relations.cpp), so
// the two count exactly the same rows. A relation counts for row t only where its key exists, is
// not t itself and is visible from t (a causal decoder sees s <= t; padding is never visible).
#pragma once

#include <cstdint>
#include <vector>

#include "headlab/analysis/attention_stats.h"

namespace headlab {

class GoldRelations {
 public:
  explicit GoldRelations(const AttentionBatchInfo& info);

  bool real(int64_t b, int64_t s) const { return info_.key_padding == nullptr || info_.key_padding[b * T_ + s] != 0; }
  bool visible(int64_t b, int64_t t, int64_t s) const {
    return s >= 0 && s < T_ && (!info_.causal || s <= t) && real(b, s);
  }
  // gold_head[t] (resp. gold_antecedent[t]) where it is a visible key other than t, else -1.
  int64_t syntactic_head(int64_t b, int64_t t) const { return visible_key(info_.gold_head, b, t); }
  int64_t antecedent(int64_t b, int64_t t) const { return visible_key(info_.gold_antecedent, b, t); }
  // Some token visible from t has t as its gold head.
  bool has_dependent(int64_t b, int64_t t) const { return !has_dependent_.empty() && has_dependent_[b * T_ + t]; }
  bool is_dependent(int64_t b, int64_t t, int64_t s) const {
    return s != t && info_.gold_head != nullptr && info_.gold_head[b * T_ + s] == t;
  }
  // Rare tokens: the smallest training count among the keys visible from t, or -1 where it picks
  // out nothing (every visible key equally frequent) or no counts were given.
  int64_t rarest_count(int64_t b, int64_t t) const { return rarest_count_.empty() ? -1 : rarest_count_[b * T_ + t]; }
  int64_t train_count(int64_t b, int64_t s) const { return info_.token_counts[info_.tokens[b * T_ + s]]; }

 private:
  int64_t visible_key(const int32_t* gold, int64_t b, int64_t t) const {
    if (gold == nullptr) return -1;
    const int64_t g = gold[b * T_ + t];
    return g != t && visible(b, t, g) ? g : -1;
  }

  const AttentionBatchInfo& info_;
  int64_t T_;
  std::vector<uint8_t> has_dependent_;  // [B,T]
  std::vector<int64_t> rarest_count_;   // [B,T]
};

// The offset holding the most rows and its row count ({0, 0} when empty). Ties go to the smaller
// |offset|, then to the negative one, so the choice never depends on the order rows came in.
struct OffsetMode {
  int64_t offset = 0, rows = 0;
};
OffsetMode most_frequent_offset(const OffsetRows& rows);

}  // namespace headlab
