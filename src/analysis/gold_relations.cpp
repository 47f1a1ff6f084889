// The gold relations of a batch's query rows (gold_relations.h) and the positional baselines of
// Voita et al. 2019: a head is "syntactic" for a relation only if its argmax finds the related
// token more often than the relation's most frequent relative position does. For each relation,
// over exactly the rows its agreement counts, the baseline counts the rows with a key of the
// relation at each offset t - s; the best offset's share of the rows is the agreement a head that
// always attends to that one offset would score (docs/analysis.md). The rare token is scored the
// same way, and every relation's chance too: the agreement of a head attending uniformly at random.
#include "gold_relations.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <vector>

#include "headlab/common/error.h"

namespace headlab {

GoldRelations::GoldRelations(const AttentionBatchInfo& info) : info_(info), T_(info.seq_len) {
  const int64_t B = info.batch_size;
  if (info.gold_head) {
    has_dependent_.assign(static_cast<size_t>(B * T_), 0);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < T_; ++s) {
        const int64_t g = info.gold_head[b * T_ + s];
        if (g >= 0 && g < T_ && g != s && visible(b, g, s)) has_dependent_[b * T_ + g] = 1;
      }
  }
  if (info.token_counts == nullptr) return;
  HEADLAB_CHECK(info.tokens != nullptr, "attention statistics: token counts given without the tokens");
  for (int64_t i = 0; i < B * T_; ++i)
    HEADLAB_CHECK(info.tokens[i] >= 0 && info.tokens[i] < info.vocab_size,
                  "attention statistics: token " << info.tokens[i] << " at row " << i
                                                 << " has no count (vocab_size=" << info.vocab_size << ")");
  // The keys visible from t: a prefix of the real tokens when causal, all of them otherwise.
  rarest_count_.assign(static_cast<size_t>(B * T_), -1);
  for (int64_t b = 0; b < B; ++b) {
    int64_t lowest = std::numeric_limits<int64_t>::max(), highest = -1;
    auto see = [&](int64_t s) {
      if (!real(b, s)) return;
      lowest = std::min(lowest, train_count(b, s));
      highest = std::max(highest, train_count(b, s));
    };
    if (!info.causal)
      for (int64_t s = 0; s < T_; ++s) see(s);
    for (int64_t t = 0; t < T_; ++t) {
      if (info.causal) see(t);
      rarest_count_[b * T_ + t] = lowest < highest ? lowest : -1;
    }
  }
}

OffsetMode most_frequent_offset(const OffsetRows& rows) {
  OffsetMode best;
  for (const auto& [offset, n] : rows) {
    const int64_t size = std::abs(offset), best_size = std::abs(best.offset);
    if (n > best.rows || (n == best.rows && (size < best_size || (size == best_size && offset < best.offset))))
      best = {offset, n};
  }
  return best;
}

void accumulate_positional_baselines(const AttentionBatchInfo& info, AttentionSums& sums) {
  const GoldRelations gold(info);
  const int64_t B = info.batch_size, T_ = info.seq_len;
  std::vector<int64_t> visible;  // the keys row t sees
  // A relation whose keys in row t are the visible s with is_key(s): one row more, one at each
  // key's offset, and its share of the visible keys towards chance.
  auto add = [&](AttentionSums::Relation& relation, int64_t t, auto is_key) {
    int64_t keys = 0;
    for (int64_t s : visible)
      if (is_key(s)) keys++, relation.key_offsets[t - s]++;
    relation.rows++;
    relation.chance += static_cast<double>(keys) / static_cast<double>(visible.size());
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T_; ++t) {
      if (info.query_rows && !info.query_rows[b * T_ + t]) continue;
      visible.clear();
      for (int64_t s = 0; s < T_; ++s)
        if (gold.visible(b, t, s)) visible.push_back(s);
      if (const int64_t g = gold.syntactic_head(b, t); g >= 0)
        add(sums.syntactic_head, t, [&](int64_t s) { return s == g; });
      if (const int64_t g = gold.antecedent(b, t); g >= 0) add(sums.antecedent, t, [&](int64_t s) { return s == g; });
      if (gold.has_dependent(b, t)) add(sums.dependent, t, [&](int64_t s) { return gold.is_dependent(b, t, s); });
      if (const int64_t rarest = gold.rarest_count(b, t); rarest >= 0)
        add(sums.rare_token, t, [&](int64_t s) { return gold.train_count(b, s) == rarest; });
    }
}

}  // namespace headlab
