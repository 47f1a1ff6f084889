// Induction / associative recall. A row is T+1 tokens x[0..T] over [0, V) (tokens = x[0..T),
// and x[T] appears only as the last target). The rule, with match length k = data.k:
//   S(t)      = { x[s+1] : k-1 <= s < t, x[s-k+1 .. s] == x[t-k+1 .. t] }, the tokens that
//               followed the earlier occurrences of the last k tokens (k = 1: of the current one)
//   target[t] = x[t+1]  if S(t) = { x[t+1] }   (it occurred before, always with the same successor,
//               -1      otherwise                and the sequence continues that way again)
// So a scored target is always "what came after this last time", and positions where that is
// not determined (never seen, earlier successors disagree) or not what happens (a copy ends)
// are not scored. Generator: a random prefix of T/4 .. T/2 tokens, then copies of earlier
// stretches (length k+1 .. T/2, source anywhere before) separated by 1-2 random tokens. Copy
// distances differ from row to row, so no fixed-offset head solves it: it takes a
// previous-token head feeding an induction head.
#include <algorithm>
#include <sstream>

#include "headlab/common/error.h"
#include "headlab/data/tasks.h"

namespace headlab {

namespace {

constexpr int64_t kDefaultVocab = 32;

class InductionTask : public SyntheticTask {
 public:
  explicit InductionTask(const TaskOptions& o)
      : SyntheticTask(o), vocab_(o.vocab_size ? o.vocab_size : kDefaultVocab), k_(o.k) {
    HEADLAB_CHECK(vocab_ >= 2, "induction: data.vocab_size=" << vocab_ << " must be at least 2");
    HEADLAB_CHECK(k_ >= 1 && 4 * (k_ + 1) <= seq_len_,
                  "induction: data.k=" << k_ << " (match length) needs data.seq_len >= 4(k+1) = " << 4 * (k_ + 1)
                                       << ", got " << seq_len_);
    prefix_min_ = std::max<int64_t>(k_ + 1, seq_len_ / 4);
    prefix_max_ = std::max(prefix_min_, seq_len_ / 2);
    copy_max_ = std::max<int64_t>(k_ + 1, seq_len_ / 2);
  }

  std::string name() const override {
    std::ostringstream s;
    s << "induction(k=" << k_ << ",vocab=" << vocab_ << ")";
    return s.str();
  }
  int64_t vocab_size() const override { return vocab_; }

 protected:
  void generate(RowRng& rng, int64_t, const ExampleView& row) const override {
    const int64_t T = row.seq_len;
    int32_t last = 0;  // x[T], which only ever appears as a target
    auto x = [&](int64_t i) -> int32_t& { return i < T ? row.tokens[i] : last; };
    auto draw = [&](int64_t lo, int64_t hi) {
      return lo + static_cast<int64_t>(rng.below(static_cast<uint64_t>(hi - lo + 1)));
    };
    auto filler = [&] { return static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab_))); };
    // A random prefix, then copies of earlier stretches separated by a little filler.
    int64_t t = draw(prefix_min_, prefix_max_);
    for (int64_t i = 0; i < t; ++i) x(i) = filler();
    while (t <= T) {
      const int64_t len = std::min(draw(k_ + 1, copy_max_), t);
      const int64_t from = draw(0, t - len);
      for (int64_t j = 0; j < len && t <= T; ++j) x(t++) = x(from + j);
      for (int64_t gap = draw(1, 2); gap > 0 && t <= T; --gap) x(t++) = filler();
    }
    for (int64_t i = k_ - 1; i < T; ++i) {
      const int32_t next = determined_next(x, i);
      if (next >= 0 && next == x(i + 1)) row.targets[i] = next;
    }
  }

 private:
  // The token that followed every earlier occurrence of the k tokens ending at t, or -1 when
  // they never occurred or were followed by different tokens.
  template <typename Access>
  int32_t determined_next(Access& x, int64_t t) const {
    int32_t next = -1;
    for (int64_t s = k_ - 1; s < t; ++s) {
      int64_t j = 0;
      while (j < k_ && x(s - j) == x(t - j)) ++j;
      if (j < k_) continue;
      if (next >= 0 && x(s + 1) != next) return -1;
      next = x(s + 1);
    }
    return next;
  }

  int64_t vocab_, k_;
  int64_t prefix_min_ = 0, prefix_max_ = 0, copy_max_ = 0;
};

}  // namespace

std::unique_ptr<SyntheticTask> make_induction_task(const TaskOptions& options) {
  return std::make_unique<InductionTask>(options);
}

}  // namespace headlab
