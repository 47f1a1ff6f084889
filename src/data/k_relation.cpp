// k-relation retrieval: the target at t is a non-commutative function of the tokens at k fixed
// relative offsets. Tokens are uniform over [0, p), p = vocab_size; with o_1..o_k = data.offsets
// (in the order given) and a_i = x[t - o_i], the target at every t >= max(o_i) is
//   target[t] = (a_1 - 1*a_2 - 2*a_3 - ... - (k-1)*a_k) mod p
// (k = 1: copy a_1; k = 2: a_1 - a_2), and -1 before max(o_i). The coefficients 1, -1, ..., -(k-1)
// are distinct mod p (p > k is required), so exchanging any two offsets changes the function.
// A single head returns one softmax mixture of the k positions' values; k heads can each read one
// position exactly. For k = 2 the target is uniform given either token alone (and for k >= 3
// given all but a_1), so no single token helps: the model must read every offset.
#include <algorithm>
#include <sstream>

#include "headlab/common/error.h"
#include "headlab/data/tasks.h"

namespace headlab {

namespace {

constexpr int64_t kDefaultVocab = 16;

class KRelationTask : public SyntheticTask {
 public:
  explicit KRelationTask(const TaskOptions& o)
      : SyntheticTask(o), p_(o.vocab_size ? o.vocab_size : kDefaultVocab), offsets_(o.offsets) {
    HEADLAB_CHECK(p_ >= 2, "k_relation: data.vocab_size=" << p_ << " must be at least 2");
    HEADLAB_CHECK(!offsets_.empty(), "k_relation: data.offsets is empty (give the relative offsets, e.g. [1, 3])");
    for (size_t i = 0; i < offsets_.size(); ++i) {
      HEADLAB_CHECK(offsets_[i] > 0 && offsets_[i] < seq_len_, "k_relation: data.offsets holds "
                                                                   << offsets_[i]
                                                                   << ", outside [1, data.seq_len=" << seq_len_ << ")");
      for (size_t j = 0; j < i; ++j)
        HEADLAB_CHECK(offsets_[i] != offsets_[j], "k_relation: data.offsets repeats " << offsets_[i]);
    }
    first_scored_ = *std::max_element(offsets_.begin(), offsets_.end());
    const auto k = static_cast<int64_t>(offsets_.size());
    HEADLAB_CHECK(k == 1 || p_ > k,
                  "k_relation: data.vocab_size=" << p_ << " must exceed the " << k
                                                 << " offsets (the rule's coefficients must differ mod p)");
  }

  std::string name() const override {
    std::ostringstream s;
    s << "k_relation(offsets=[";
    for (size_t i = 0; i < offsets_.size(); ++i) s << (i ? "," : "") << offsets_[i];
    s << "],vocab=" << p_ << ")";
    return s.str();
  }
  int64_t vocab_size() const override { return p_; }

 protected:
  void generate(RowRng& rng, int64_t, const ExampleView& row) const override {
    const int64_t T = row.seq_len;
    for (int64_t t = 0; t < T; ++t) row.tokens[t] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(p_)));
    for (int64_t t = first_scored_; t < T; ++t) row.targets[t] = target_at(row.tokens, t);
  }

 private:
  int32_t target_at(const int32_t* x, int64_t t) const {
    int64_t sum = x[t - offsets_[0]];
    for (size_t i = 1; i < offsets_.size(); ++i) sum -= static_cast<int64_t>(i) * x[t - offsets_[i]];
    return static_cast<int32_t>((sum % p_ + p_) % p_);
  }

  int64_t p_;
  std::vector<int64_t> offsets_;
  int64_t first_scored_ = 0;
};

}  // namespace

std::unique_ptr<SyntheticTask> make_k_relation_task(const TaskOptions& options) {
  return std::make_unique<KRelationTask>(options);
}

}  // namespace headlab
