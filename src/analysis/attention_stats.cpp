// Statistics of attention probabilities, per head, summed over query rows (and then divided in
// finish_attention_stats). For a counted query row t of example b and head h, with p = A[b,h,t,:]
// and a = argmax_s p[s] (the first maximum):
//   entropy     -sum_s p[s] ln p[s]           (nats; 0 for one-hot, ln n for uniform over n keys)
//   distance    sum_s p[s] |t - s|            (tokens)
//   confidence  max_s p[s]                    (Voita et al.)
//   delimiter   sum_s p[s] is_delimiter[s]
//   agreement   a == t-1 (previous token), a == gold_head[t] (the syntactic head), gold_head[a]
//               == t (a dependent), a == gold_antecedent[t], is_delimiter[a]; each counted only
//               over rows where the relation exists and is visible from t (gold_relations.h: a
//               causal decoder cannot attend forward, so a determiner's head noun, which follows
//               it, is not scored as its head, but the noun attending back to its determiner
//               scores as a dependent); and the rare token: a's training count is the smallest
//               among the keys visible from t (rows where those all tie are not counted);
//   offset      t - a, counted per value: the most frequent one is the head's positional offset
//               (Voita et al.'s positional heads), over all counted rows.
// Cross-attention rows (keys of another sequence) count only entropy and confidence.
// JS distance between heads i and j on a row: sqrt(JSD(p_i, p_j)) with base-2 logs, in [0, 1],
// via JSD = H(m) - (H(p_i) + H(p_j))/2, m = (p_i + p_j)/2, so each pair costs one log per key
// (the rows' entropies are computed once). Identical rows give m == p bit for bit, so exactly 0.
// Parallel over heads (stats) or head pairs (JS); every slot is summed by one thread in row
// order, so results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>

#include "gold_relations.h"
#include "headlab/analysis/attention_stats.h"
#include "headlab/common/error.h"

namespace headlab {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// -sum p ln p over the first n entries, in index order (the JS identity relies on the order).
template <typename T>
double entropy_of(const T* p, int64_t n) {
  double h = 0;
  for (int64_t s = 0; s < n; ++s) {
    const double x = static_cast<double>(p[s]);
    if (x > 0) h -= x * std::log(x);
  }
  return h;
}

int64_t keys_of(const AttentionBatchInfo& info) {
  return info.key_len > 0 ? info.key_len : info.seq_len;
}

void check_probs_shape(const char* who, const Shape& shape, const AttentionBatchInfo& info) {
  HEADLAB_CHECK(shape.rank == 4 && shape[0] == info.batch_size && shape[2] == info.seq_len && shape[3] == keys_of(info),
                who << ": probabilities of shape " << shape.str() << " do not match B=" << info.batch_size
                    << ", T=" << info.seq_len << ", keys=" << keys_of(info) << " (expected [B,H,T,keys])");
}

}  // namespace

AttentionSums::AttentionSums(int64_t n)
    : rows(n),
      entropy(n),
      distance(n),
      confidence(n),
      delimiter_mass(n),
      positioned(n),
      previous_n(n),
      previous_hit(n),
      head_n(n),
      head_hit(n),
      dependent_n(n),
      dependent_hit(n),
      antecedent_n(n),
      antecedent_hit(n),
      delimiter_n(n),
      delimiter_hit(n),
      rare_n(n),
      rare_hit(n),
      argmax_offsets(n),
      js_sum(n * n),
      js_pair_rows(n * n) {}

template <typename T>
double js_distance(const T* p, const T* q, int64_t n) {
  double jsd = 0;
  for (int64_t s = 0; s < n; ++s) {
    const double a = static_cast<double>(p[s]), b = static_cast<double>(q[s]), m = 0.5 * (a + b);
    if (a > 0) jsd += 0.5 * a * std::log(a / m);
    if (b > 0) jsd += 0.5 * b * std::log(b / m);
  }
  return std::sqrt(std::clamp(jsd / std::log(2.0), 0.0, 1.0));
}

template <typename T>
void accumulate_attention_stats(const Tensor<T>& probs, int64_t first_slot, const AttentionBatchInfo& info,
                                AttentionSums& sums) {
  check_probs_shape("accumulate_attention_stats", probs.shape(), info);
  HEADLAB_CHECK(probs.is_contiguous(), "accumulate_attention_stats: probabilities must be contiguous");
  const int64_t B = info.batch_size, T_ = info.seq_len, S = keys_of(info), H = probs.size(1);
  const bool cross = info.key_len > 0;
  HEADLAB_CHECK(first_slot >= 0 && first_slot + H <= static_cast<int64_t>(sums.rows.size()),
                "accumulate_attention_stats: slots " << first_slot << " + " << H << " heads do not fit "
                                                     << sums.rows.size() << " slots");
  const GoldRelations gold(info);

#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < H; ++h) {
    const int64_t slot = first_slot + h;
    double rows = 0, positioned = 0, entropy = 0, distance = 0, confidence = 0, delimiter_mass = 0;
    int64_t prev_n = 0, prev_hit = 0, head_n = 0, head_hit = 0, dep_n = 0, dep_hit = 0, ante_n = 0, ante_hit = 0,
            delim_n = 0, delim_hit = 0, rare_n = 0, rare_hit = 0;
    std::vector<int64_t> offset_rows(static_cast<size_t>(2 * T_ - 1));  // [t - a + T - 1]
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < T_; ++t) {
        if (info.query_rows && !info.query_rows[b * T_ + t]) continue;
        const T* p = probs.data() + ((b * H + h) * T_ + t) * S;
        // The keys the row sees: all S of another sequence, or up to t when causal (A is 0 past it).
        const int64_t n_keys = cross ? S : info.causal ? t + 1 : T_;
        double best = -1, dist = 0, delim = 0;
        int64_t arg = 0;
        for (int64_t s = 0; s < n_keys; ++s) {
          const double x = static_cast<double>(p[s]);
          if (x > best) best = x, arg = s;
          dist += x * static_cast<double>(std::abs(t - s));
          if (!cross && info.is_delimiter && info.is_delimiter[b * T_ + s]) delim += x;
        }
        rows += 1;
        entropy += entropy_of(p, n_keys);
        confidence += best;
        if (cross) continue;
        positioned += 1;
        distance += dist;
        delimiter_mass += delim;
        offset_rows[t - arg + T_ - 1]++;
        if (gold.visible(b, t, t - 1)) prev_n++, prev_hit += arg == t - 1;
        if (const int64_t g = gold.syntactic_head(b, t); g >= 0) head_n++, head_hit += arg == g;
        if (gold.has_dependent(b, t)) dep_n++, dep_hit += gold.is_dependent(b, t, arg);
        if (const int64_t g = gold.antecedent(b, t); g >= 0) ante_n++, ante_hit += arg == g;
        if (info.is_delimiter) delim_n++, delim_hit += info.is_delimiter[b * T_ + arg] != 0;
        if (const int64_t rarest = gold.rarest_count(b, t); rarest >= 0)
          rare_n++, rare_hit += gold.train_count(b, arg) == rarest;
      }
    }
    sums.rows[slot] += rows;
    sums.positioned[slot] += positioned;
    sums.entropy[slot] += entropy;
    sums.distance[slot] += distance;
    sums.confidence[slot] += confidence;
    sums.delimiter_mass[slot] += delimiter_mass;
    sums.previous_n[slot] += prev_n, sums.previous_hit[slot] += prev_hit;
    sums.head_n[slot] += head_n, sums.head_hit[slot] += head_hit;
    sums.dependent_n[slot] += dep_n, sums.dependent_hit[slot] += dep_hit;
    sums.antecedent_n[slot] += ante_n, sums.antecedent_hit[slot] += ante_hit;
    sums.delimiter_n[slot] += delim_n, sums.delimiter_hit[slot] += delim_hit;
    sums.rare_n[slot] += rare_n, sums.rare_hit[slot] += rare_hit;
    for (int64_t i = 0; i < 2 * T_ - 1; ++i)
      if (offset_rows[i] > 0) sums.argmax_offsets[slot][i - (T_ - 1)] += offset_rows[i];
  }
}

template <typename T>
void accumulate_js_distance(const std::vector<Tensor<T>>& probs, const AttentionBatchInfo& info, AttentionSums& sums,
                            const std::vector<int64_t>& first_slots) {
  HEADLAB_CHECK(!probs.empty(), "accumulate_js_distance: no sites");
  HEADLAB_CHECK(first_slots.empty() || first_slots.size() == probs.size(),
                "accumulate_js_distance: " << first_slots.size() << " first slots for " << probs.size() << " sites");
  const int64_t B = info.batch_size, T_ = info.seq_len, S = keys_of(info);
  const auto n_slots = static_cast<int64_t>(sums.rows.size());
  std::vector<std::pair<int64_t, int64_t>> head_at;  // (site, head) of each head here, site by site
  std::vector<int64_t> slot_of;                      // its slot in sums
  for (size_t l = 0; l < probs.size(); ++l) {
    const Tensor<T>& p = probs[l];
    check_probs_shape("accumulate_js_distance", p.shape(), info);
    HEADLAB_CHECK(p.is_contiguous(), "accumulate_js_distance: every site needs contiguous [B,H,T,keys] probabilities");
    for (int64_t h = 0; h < p.size(1); ++h) {
      head_at.emplace_back(static_cast<int64_t>(l), h);
      slot_of.push_back(first_slots.empty() ? static_cast<int64_t>(slot_of.size()) : first_slots[l] + h);
    }
  }
  const auto N = static_cast<int64_t>(head_at.size());
  HEADLAB_CHECK(static_cast<int64_t>(sums.js_sum.size()) == n_slots * n_slots &&
                    (first_slots.empty() ? N == n_slots : N <= n_slots),
                "accumulate_js_distance: " << N << " heads do not fit sums of " << sums.js_sum.size() << " pairs");
  for (int64_t slot : slot_of)
    HEADLAB_CHECK(slot >= 0 && slot < n_slots,
                  "accumulate_js_distance: slot " << slot << " is outside [0, " << n_slots << ")");
  std::vector<int64_t> rows;  // b * T + t of each counted query row
  for (int64_t r = 0; r < B * T_; ++r)
    if (!info.query_rows || info.query_rows[r]) rows.push_back(r);
  const auto R = static_cast<int64_t>(rows.size());
  auto row_of = [&](int64_t head, int64_t r) {
    const int64_t b = rows[r] / T_, t = rows[r] % T_;
    const auto [l, h] = head_at[static_cast<size_t>(head)];
    const int64_t H = probs[static_cast<size_t>(l)].size(1);
    return probs[static_cast<size_t>(l)].data() + ((b * H + h) * T_ + t) * S;
  };
  auto keys_of_row = [&](int64_t r) { return info.key_len > 0 ? S : info.causal ? rows[r] % T_ + 1 : T_; };
  std::vector<double> row_entropy(N * R);  // [head, row]
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i)
    for (int64_t r = 0; r < R; ++r) row_entropy[i * R + r] = entropy_of(row_of(i, r), keys_of_row(r));

  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = i + 1; j < N; ++j) pairs.emplace_back(i, j);
  const double ln2 = std::log(2.0);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < static_cast<int64_t>(pairs.size()); ++k) {
    const auto [i, j] = pairs[static_cast<size_t>(k)];
    double total = 0;
    for (int64_t r = 0; r < R; ++r) {
      const T* p = row_of(i, r);
      const T* q = row_of(j, r);
      double h_mix = 0;
      for (int64_t s = 0, n = keys_of_row(r); s < n; ++s) {
        const double m = 0.5 * (static_cast<double>(p[s]) + static_cast<double>(q[s]));
        if (m > 0) h_mix -= m * std::log(m);
      }
      const double jsd = (h_mix - 0.5 * (row_entropy[i * R + r] + row_entropy[j * R + r])) / ln2;
      total += std::sqrt(std::clamp(jsd, 0.0, 1.0));
    }
    const int64_t a = slot_of[static_cast<size_t>(i)], b = slot_of[static_cast<size_t>(j)];
    sums.js_sum[a * n_slots + b] += total;
    sums.js_sum[b * n_slots + a] += total;
    sums.js_pair_rows[a * n_slots + b] += R;
    sums.js_pair_rows[b * n_slots + a] += R;
  }
  sums.js_rows += R;
}

void finish_attention_stats(const AttentionSums& sums, HeadScores& scores) {
  const auto N = static_cast<int64_t>(sums.rows.size());
  HEADLAB_CHECK(N == scores.n_total(),
                "finish_attention_stats: " << N << " slots for " << scores.n_total() << " heads");
  auto mean = [](double sum, double n) { return n > 0 ? sum / n : kNaN; };
  auto resize = [&](std::vector<double>& v) { v.assign(static_cast<size_t>(N), kNaN); };
  for (auto* v : {&scores.entropy, &scores.distance, &scores.confidence, &scores.delimiter_mass,
                  &scores.previous_token_agreement, &scores.positional_offset, &scores.positional_share,
                  &scores.syntactic_head_agreement, &scores.dependent_agreement, &scores.antecedent_agreement,
                  &scores.delimiter_agreement, &scores.rare_token_agreement, &scores.js_nearest,
                  &scores.syntactic_head_rows, &scores.dependent_rows, &scores.rare_token_rows})
    resize(*v);
  for (int64_t i = 0; i < N; ++i) {
    const double rows = sums.rows[i];
    scores.entropy[i] = mean(sums.entropy[i], rows);
    scores.distance[i] = mean(sums.distance[i], sums.positioned[i]);
    scores.confidence[i] = mean(sums.confidence[i], rows);
    scores.delimiter_mass[i] = sums.delimiter_n[i] > 0 ? mean(sums.delimiter_mass[i], sums.positioned[i]) : kNaN;
    auto rate = [&](int64_t hit, int64_t n) { return mean(static_cast<double>(hit), static_cast<double>(n)); };
    scores.previous_token_agreement[i] = rate(sums.previous_hit[i], sums.previous_n[i]);
    scores.syntactic_head_agreement[i] = rate(sums.head_hit[i], sums.head_n[i]);
    scores.dependent_agreement[i] = rate(sums.dependent_hit[i], sums.dependent_n[i]);
    scores.antecedent_agreement[i] = rate(sums.antecedent_hit[i], sums.antecedent_n[i]);
    scores.delimiter_agreement[i] = rate(sums.delimiter_hit[i], sums.delimiter_n[i]);
    scores.rare_token_agreement[i] = rate(sums.rare_hit[i], sums.rare_n[i]);
    auto rows_of = [](int64_t n) { return n > 0 ? static_cast<double>(n) : kNaN; };
    scores.syntactic_head_rows[i] = rows_of(sums.head_n[i]);
    scores.dependent_rows[i] = rows_of(sums.dependent_n[i]);
    scores.rare_token_rows[i] = rows_of(sums.rare_n[i]);
    if (sums.positioned[i] > 0) {
      const OffsetMode mode = most_frequent_offset(sums.argmax_offsets[i]);
      scores.positional_offset[i] = static_cast<double>(mode.offset);
      scores.positional_share[i] = static_cast<double>(mode.rows) / sums.positioned[i];
    }
  }
  auto baseline_of = [](const AttentionSums::Relation& relation) {
    PositionalBaseline baseline;
    if (relation.rows == 0) return baseline;
    const OffsetMode mode = most_frequent_offset(relation.key_offsets);
    baseline.offset = static_cast<double>(mode.offset);
    baseline.agreement = static_cast<double>(mode.rows) / static_cast<double>(relation.rows);
    baseline.chance = relation.chance / static_cast<double>(relation.rows);
    return baseline;
  };
  scores.syntactic_head_baseline = baseline_of(sums.syntactic_head);
  scores.dependent_baseline = baseline_of(sums.dependent);
  scores.antecedent_baseline = baseline_of(sums.antecedent);
  scores.rare_token_baseline = baseline_of(sums.rare_token);
  scores.js_distance.clear();
  if (sums.js_rows == 0) return;
  scores.js_distance.resize(static_cast<size_t>(N * N));
  for (int64_t i = 0; i < N; ++i) {
    double nearest = kNaN;
    for (int64_t j = 0; j < N; ++j) {
      const int64_t pair_rows = sums.js_pair_rows[i * N + j];
      const double d = i == j ? 0.0 : pair_rows > 0 ? sums.js_sum[i * N + j] / static_cast<double>(pair_rows) : kNaN;
      scores.js_distance[i * N + j] = d;
      if (j != i && !std::isnan(d) && !(d >= nearest)) nearest = d;
    }
    scores.js_nearest[i] = nearest;
  }
}

#define HEADLAB_INSTANTIATE(T)                                                                                       \
  template double js_distance<T>(const T*, const T*, int64_t);                                                       \
  template void accumulate_attention_stats<T>(const Tensor<T>&, int64_t, const AttentionBatchInfo&, AttentionSums&); \
  template void accumulate_js_distance<T>(const std::vector<Tensor<T>>&, const AttentionBatchInfo&, AttentionSums&,  \
                                          const std::vector<int64_t>&);
HEADLAB_INSTANTIATE(float)
HEADLAB_INSTANTIATE(double)
#undef HEADLAB_INSTANTIATE

}  // namespace headlab
