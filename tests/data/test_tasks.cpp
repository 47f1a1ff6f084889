#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/data/tasks.h"
#include "support/alloc_counter.h"
#include "headlab/autograd/tape.h"
#include "headlab/tensor/arena.h"
#include "headlab/train/setup.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

TaskOptions task(const std::string& name, int64_t seq_len, int64_t vocab_size) {
  TaskOptions o;
  o.task = name;
  o.seq_len = seq_len;
  o.vocab_size = vocab_size;
  o.seed = 11;
  return o;
}

// One small configuration of every task, for the generic properties.
std::vector<TaskOptions> every_task() {
  TaskOptions grammar = task("grammar", 48, 0);
  TaskOptions induction = task("induction", 32, 16);
  induction.k = 2;
  TaskOptions reverse = task("reverse", 16, 12), sort = task("sort", 16, 12);
  reverse.min_len = sort.min_len = 2;
  return {task("k_relation", 24, 8), induction, reverse, sort, grammar, task("classify", 20, 16)};
}

// Everything a model sees or is scored on in row r: tokens, targets and the label.
using Example = std::vector<int32_t>;
Example example_of(const Batch& b, int64_t r) {
  const int64_t T = b.seq_len;
  Example e(b.tokens.begin() + r * T, b.tokens.begin() + (r + 1) * T);
  e.insert(e.end(), b.targets.begin() + r * T, b.targets.begin() + (r + 1) * T);
  if (!b.labels.empty()) e.push_back(b.labels[static_cast<size_t>(r)]);
  return e;
}

bool row_is_empty(const Batch& b, int64_t r) {
  const int64_t T = b.seq_len;
  const bool no_targets =
      std::all_of(b.targets.begin() + r * T, b.targets.begin() + (r + 1) * T, [](int32_t t) { return t == -1; });
  return no_targets && (b.labels.empty() || b.labels[static_cast<size_t>(r)] == -1);
}

std::set<Example> eval_set(const Dataset& d, Split split, int64_t B) {
  std::set<Example> examples;
  Batch b = d.make_batch(B);
  for (int64_t i = 0; i < d.eval_batches(split, B); ++i) {
    d.fill_batch(split, i, b);
    for (int64_t r = 0; r < B; ++r)
      if (!row_is_empty(b, r)) examples.insert(example_of(b, r));
  }
  return examples;
}

bool same_batch(const Batch& a, const Batch& b) {
  return a.tokens == b.tokens && a.targets == b.targets && a.labels == b.labels && a.key_padding == b.key_padding &&
         a.gold_head == b.gold_head && a.gold_antecedent == b.gold_antecedent && a.is_delimiter == b.is_delimiter;
}

}  // namespace

TEST_CASE("every synthetic task gives the same batches for a seed and different ones for another", "[data][tasks]") {
  for (const TaskOptions& o : every_task()) {
    INFO(o.task);
    auto first = make_task(o), second = make_task(o);
    TaskOptions other_seed = o;
    other_seed.seed = o.seed + 1;
    auto third = make_task(other_seed);
    Batch a = first->make_batch(8), b = second->make_batch(8), c = third->make_batch(8);
    for (Split split : {Split::train, Split::val, Split::test}) {
      first->fill_batch(split, 3, a);
      second->fill_batch(Split::train, 0, b);  // dirty the buffers first: a refill must overwrite everything
      second->fill_batch(split, 3, b);
      third->fill_batch(split, 3, c);
      CHECK(same_batch(a, b));
      CHECK(a.tokens != c.tokens);
    }
    first->fill_batch(Split::train, 4, b);
    CHECK(a.tokens != b.tokens);
  }
}

TEST_CASE("synthetic tasks have finite val and test sets of eval_examples rows", "[data][tasks]") {
  for (TaskOptions o : every_task()) {
    INFO(o.task);
    o.eval_examples = 100;
    auto d = make_task(o);
    CHECK(d->eval_batches(Split::train, 32) == 0);
    CHECK(d->eval_batches(Split::val, 32) == 4);
    Batch b = d->make_batch(32);
    d->fill_batch(Split::test, 3, b);  // rows 96..127: four examples, then padding rows
    for (int64_t r = 0; r < 32; ++r) CHECK(row_is_empty(b, r) == (r >= 4));
  }
}

TEST_CASE("batches_to_score covers a finite split at most once and needs a count for an unbounded one",
          "[data][tasks]") {
  TaskOptions o = every_task().front();
  o.eval_examples = 100;
  auto d = make_task(o);
  CHECK(d->batches_to_score(Split::val, 0, 32, "evaluate") == 4);   // all of it
  CHECK(d->batches_to_score(Split::val, 3, 32, "evaluate") == 3);   // fewer, as asked
  CHECK(d->batches_to_score(Split::val, 50, 32, "evaluate") == 4);  // never past its end
  CHECK(d->batches_to_score(Split::train, 7, 32, "analyze") == 7);
  REQUIRE_THROWS_WITH(d->batches_to_score(Split::train, 0, 32, "analyze"),
                      "analyze: the train split of " + d->name() + " has no natural size; give a number of batches");
}

TEST_CASE("a task's training token counts are the real tokens of a fixed sample of train batches", "[data][tasks]") {
  for (const TaskOptions& o : every_task()) {
    INFO(o.task);
    auto d = make_task(o);
    const std::vector<int64_t> counts = d->train_token_counts();
    REQUIRE(static_cast<int64_t>(counts.size()) == d->vocab_size());
    // The documented sample: train batches 0..63 of 64 rows, padding (key_padding) left out.
    std::vector<int64_t> expected(counts.size());
    Batch b = d->make_batch(64);
    for (int64_t i = 0; i < 64; ++i) {
      d->fill_batch(Split::train, i, b);
      for (size_t j = 0; j < b.tokens.size(); ++j)
        if (b.key_padding.empty() || b.key_padding[j]) expected[static_cast<size_t>(b.tokens[j])]++;
    }
    CHECK(counts == expected);
    CHECK(d->train_token_counts() == counts);
  }
}

TEST_CASE("refilling a synthetic batch allocates nothing", "[data][tasks]") {
  for (const TaskOptions& o : every_task()) {
    INFO(o.task);
    auto d = make_task(o);
    Batch b = d->make_batch(16);
    d->fill_batch(Split::train, 0, b);
    d->fill_batch(Split::val, 0, b);  // the first val fill draws (and keeps) the whole val set
    const int64_t before = test::heap_allocations();
    for (int64_t i = 1; i < 20; ++i) d->fill_batch(Split::train, i, b);
    d->fill_batch(Split::val, 1, b);
    CHECK(test::heap_allocations() == before);
  }
}

TEST_CASE("val and test batches come from the kept eval set exactly as drawing each example gives them",
          "[data][tasks]") {
  for (const TaskOptions& o : every_task()) {
    INFO(o.task);
    auto d = make_task(o);
    const auto& task = dynamic_cast<const SyntheticTask&>(*d);
    const int64_t B = 7;  // does not divide the eval set: the last batch ends in empty rows
    Batch batch = d->make_batch(B), one = d->make_batch(1);
    for (Split split : {Split::val, Split::test}) {
      const int64_t batches = d->eval_batches(split, B);
      for (int64_t i : {batches - 1, int64_t{0}, batches / 2}) {  // out of order: fill order must not matter
        d->fill_batch(Split::train, i, batch);                    // dirty the rows first
        d->fill_batch(split, i, batch);
        for (int64_t r = 0; r < B; ++r) {
          const int64_t id = i * B + r;
          INFO("batch " << i << " row " << r);
          if (id >= o.eval_examples) {
            CHECK(row_is_empty(batch, r));
            continue;
          }
          task.write_example(
              split, id,
              {o.seq_len, one.tokens.data(), one.targets.data(), one.labels.empty() ? nullptr : one.labels.data(),
               one.key_padding.empty() ? nullptr : one.key_padding.data(),
               one.gold_head.empty() ? nullptr : one.gold_head.data(),
               one.gold_antecedent.empty() ? nullptr : one.gold_antecedent.data(),
               one.is_delimiter.empty() ? nullptr : one.is_delimiter.data()});
          Batch row = d->make_batch(1);
          copy_row(batch, r, row, 0);
          CHECK(same_batch(row, one));
        }
      }
    }
  }
}

TEST_CASE("train, val and test share no example even when the example space is tiny", "[data][tasks]") {
  // Spaces of a few hundred examples: a sample of 6400 training rows covers nearly all of train,
  // so any example in two splits would show up.
  TaskOptions k_relation = task("k_relation", 5, 3);  // 3^5 = 243 token rows
  TaskOptions induction = task("induction", 8, 2);    // 2^9 = 512 rows of T+1 tokens
  induction.k = 1;
  TaskOptions reverse = task("reverse", 8, 6), sort = task("sort", 8, 6);  // 4 items, 2..4 long: 336
  reverse.min_len = sort.min_len = 2;
  reverse.max_len = sort.max_len = 4;
  TaskOptions classify = task("classify", 6, 8);  // 5 items, segments of 2
  TaskOptions grammar = task("grammar", 16, 25);  // the smallest lexicon, one to four sentences
  for (const TaskOptions& o : {k_relation, induction, reverse, sort, classify, grammar}) {
    INFO(o.task);
    auto d = make_task(o);
    const std::set<Example> val = eval_set(*d, Split::val, 64), test = eval_set(*d, Split::test, 64);
    std::set<Example> train;
    Batch b = d->make_batch(32);
    for (int64_t i = 0; i < 200; ++i) {
      d->fill_batch(Split::train, i, b);
      for (int64_t r = 0; r < 32; ++r) train.insert(example_of(b, r));
    }
    INFO("distinct examples: train " << train.size() << ", val " << val.size() << ", test " << test.size());
    CHECK(!val.empty());
    CHECK(!test.empty());
    auto overlap = [](const std::set<Example>& x, const std::set<Example>& y) {
      return std::count_if(x.begin(), x.end(), [&](const Example& e) { return y.count(e) > 0; });
    };
    CHECK(overlap(val, train) == 0);
    CHECK(overlap(test, train) == 0);
    CHECK(overlap(val, test) == 0);
  }
}

TEST_CASE("a fixed training set of train_examples rows is all training ever sees", "[data][tasks]") {
  TaskOptions o = task("sort", 16, 12);
  o.train_examples = 50;
  auto d = make_task(o);
  std::set<Example> seen;
  Batch b = d->make_batch(32);
  for (int64_t i = 0; i < 100; ++i) {
    d->fill_batch(Split::train, i, b);
    for (int64_t r = 0; r < 32; ++r) seen.insert(example_of(b, r));
  }
  CHECK(seen.size() == 50);
}

TEST_CASE("k_relation targets are the documented function of the tokens at the offsets", "[data][tasks]") {
  struct Case {
    std::vector<int64_t> offsets;
    int64_t p;
  };
  for (const Case& c : {Case{{2}, 8}, Case{{1, 3}, 11}, Case{{3, 1}, 11}, Case{{1, 2, 4}, 7}}) {
    TaskOptions o = task("k_relation", 24, c.p);
    o.offsets = c.offsets;
    auto d = make_task(o);
    CHECK(d->vocab_size() == c.p);
    const int64_t first = *std::max_element(c.offsets.begin(), c.offsets.end());
    Batch b = d->make_batch(16);
    for (Split split : {Split::train, Split::test}) {
      d->fill_batch(split, 2, b);
      for (int64_t r = 0; r < 16; ++r) {
        const int32_t* x = b.tokens.data() + r * 24;
        const int32_t* y = b.targets.data() + r * 24;
        for (int64_t t = 0; t < 24; ++t) {
          REQUIRE((x[t] >= 0 && x[t] < c.p));
          int64_t expected = -1;
          if (t >= first) {
            // a_1 - 1*a_2 - 2*a_3 ... mod p
            int64_t sum = x[t - c.offsets[0]];
            for (size_t i = 1; i < c.offsets.size(); ++i) sum -= static_cast<int64_t>(i) * x[t - c.offsets[i]];
            expected = ((sum % c.p) + c.p) % c.p;
          }
          REQUIRE(y[t] == expected);
        }
      }
    }
  }
  // k = 2 is an ordered relation: offsets [1, 3] and [3, 1] give different targets on the same tokens.
  TaskOptions forward = task("k_relation", 24, 11), backward = forward;
  backward.offsets = {3, 1};
  Batch f = make_task(forward)->make_batch(1), g = f;
  make_task(forward)->fill_batch(Split::train, 0, f);
  make_task(backward)->fill_batch(Split::train, 0, g);
  CHECK(f.targets != g.targets);
  CHECK_THROWS_WITH(make_task(task("k_relation", 24, 2)), Catch::Contains("must exceed the 2 offsets"));
}

TEST_CASE("induction targets are the token that followed every earlier occurrence of the last k", "[data][tasks]") {
  for (int64_t k : {1, 2, 3}) {
    INFO("k = " << k);
    const int64_t T = 48;
    TaskOptions o = task("induction", T, k == 1 ? 24 : 6);
    o.k = k;
    auto d = make_task(o);
    Batch b = d->make_batch(32);
    int64_t scored = 0, total = 0;
    for (int64_t i = 0; i < 20; ++i) {
      d->fill_batch(Split::train, i, b);
      for (int64_t r = 0; r < 32; ++r) {
        const int32_t* x = b.tokens.data() + r * T;
        const int32_t* y = b.targets.data() + r * T;
        for (int64_t t = 0; t < T; ++t) {
          // The successors of the earlier occurrences of x[t-k+1..t] (x[T] is unknown: -2).
          std::set<int32_t> successors;
          for (int64_t s = k - 1; s < t; ++s)
            if (std::equal(x + s - k + 1, x + s + 1, x + t - k + 1)) successors.insert(x[s + 1]);
          const int32_t determined = successors.size() == 1 ? *successors.begin() : -1;
          const int32_t next = t + 1 < T ? x[t + 1] : -2;
          if (next != -2)
            REQUIRE(y[t] == (determined >= 0 && determined == next ? next : -1));
          else if (y[t] != -1)
            REQUIRE(y[t] == determined);
          scored += y[t] != -1;
          ++total;
        }
      }
    }
    INFO("scored " << scored << " of " << total);
    CHECK(scored > total / 5);
  }
}

TEST_CASE("reverse and sort score exactly the output, which is the items reversed or sorted", "[data][tasks]") {
  for (const char* name : {"reverse", "sort"}) {
    INFO(name);
    TaskOptions o = task(name, 20, 10);  // items 0..7, SEP 8, PAD 9
    o.min_len = 3;
    o.max_len = 10;
    auto d = make_task(o);
    Batch b = d->make_batch(32);
    std::set<int64_t> lengths;
    for (int64_t i = 0; i < 10; ++i) {
      d->fill_batch(Split::val, i, b);
      for (int64_t r = 0; r < 32; ++r) {
        const int32_t* x = b.tokens.data() + r * 20;
        const int32_t* y = b.targets.data() + r * 20;
        const int64_t n = std::find(x, x + 20, 8) - x;
        REQUIRE((n >= 3 && n <= 10));
        lengths.insert(n);
        std::vector<int32_t> items(x, x + n);
        if (std::string(name) == "sort")
          std::sort(items.begin(), items.end());
        else
          std::reverse(items.begin(), items.end());
        for (int64_t t = 0; t < 20; ++t) {
          const bool output = t >= n && t < 2 * n;
          REQUIRE(y[t] == (output ? items[static_cast<size_t>(t - n)] : -1));
          if (t > n && t <= 2 * n && t < 20) REQUIRE(x[t] == items[static_cast<size_t>(t - n - 1)]);
          if (t > 2 * n) REQUIRE(x[t] == 9);
        }
      }
    }
    CHECK(lengths.size() == 8);
  }
}

TEST_CASE("grammar annotations are consistent: heads, agreement, antecedents and delimiters", "[data][tasks]") {
  const int64_t T = 64;
  auto d = make_task(task("grammar", T, 0));
  const std::vector<GrammarWord> lex = grammar_lexicon(0);
  REQUIRE(d->vocab_size() == static_cast<int64_t>(lex.size()));
  auto cls = [&](int32_t id) { return lex[static_cast<size_t>(id)].word_class; };
  auto number = [&](int32_t id) { return lex[static_cast<size_t>(id)].number; };
  int64_t sentences = 0, pronouns = 0, attracted = 0, relative_subjects = 0;
  Batch b = d->make_batch(32);
  for (int64_t i = 0; i < 10; ++i) {
    d->fill_batch(Split::train, i, b);
    for (int64_t r = 0; r < 32; ++r) {
      const int32_t* x = b.tokens.data() + r * T;
      const int32_t* y = b.targets.data() + r * T;
      const int32_t* head = b.gold_head.data() + r * T;
      const int32_t* ante = b.gold_antecedent.data() + r * T;
      const uint8_t* delim = b.is_delimiter.data() + r * T;
      // Real tokens, then padding; the targets are the next tokens, up to the row's end.
      const int64_t n = std::find_if(x, x + T, [&](int32_t w) { return cls(w) == WordClass::pad; }) - x;
      REQUIRE(n > 0);
      for (int64_t t = 0; t < T; ++t) {
        REQUIRE(delim[t] == (cls(x[t]) == WordClass::delimiter));
        if (t + 1 < n) REQUIRE(y[t] == x[t + 1]);
        if (t >= n) REQUIRE((cls(x[t]) == WordClass::pad && y[t] == -1 && head[t] == -1 && ante[t] == -1));
      }
      if (n < T) REQUIRE((y[n - 1] == -1 && cls(x[n - 1]) == WordClass::delimiter));  // padding only after a "."
      int64_t previous_start = -1, start = 0;
      while (start < n) {
        // A sentence runs to its "." (or to the row's end when that "." is the last target).
        int64_t end = start;
        while (end < n && !delim[end]) ++end;
        if (end == n) REQUIRE((n == T && y[T - 1] >= 0 && cls(y[T - 1]) == WordClass::delimiter));
        ++sentences;
        int64_t roots = 0;
        for (int64_t t = start; t <= std::min(end, n - 1); ++t) {
          if (head[t] == -1) {
            ++roots;
            REQUIRE(cls(x[t]) == WordClass::verb);
            continue;
          }
          REQUIRE((head[t] >= start && head[t] <= end && head[t] != t));
          int64_t up = t, steps = 0;  // following heads reaches the root without a cycle
          while (head[up] != -1 && steps++ < T) up = head[up];
          REQUIRE(head[up] == -1);
          if (cls(x[t]) == WordClass::determiner) {
            REQUIRE((head[t] == t + 1 && cls(x[t + 1]) == WordClass::noun));
            if (number(x[t]) == 1) REQUIRE(number(x[t + 1]) == 1);
          }
          if (cls(x[t]) == WordClass::delimiter) REQUIRE(head[head[t]] == -1);
        }
        REQUIRE(roots == 1);
        // Agreement: a verb's subject is its nearest preceding noun or pronoun dependent, or,
        // in "N that V", the noun the relative clause modifies.
        for (int64_t v = start; v < std::min(end, n); ++v) {
          if (cls(x[v]) != WordClass::verb) continue;
          int64_t subject = -1;
          for (int64_t t = v - 1; t >= start && subject < 0; --t)
            if (head[t] == v && (cls(x[t]) == WordClass::noun || cls(x[t]) == WordClass::pronoun)) subject = t;
          if (subject < 0) {
            REQUIRE((v - 1 >= start && cls(x[v - 1]) == WordClass::complementizer && head[v - 1] == v));
            subject = head[v];
            ++relative_subjects;
          }
          REQUIRE(number(x[v]) == number(x[subject]));
          for (int64_t t = subject + 1; t < v; ++t)  // an intervening noun of the other number
            if (cls(x[t]) == WordClass::noun && number(x[t]) != number(x[v])) {
              ++attracted;
              break;
            }
        }
        // Pronouns: the antecedent is the last noun of the previous sentence that agrees.
        for (int64_t t = start; t < std::min(end, n); ++t) {
          if (cls(x[t]) != WordClass::pronoun) {
            REQUIRE(ante[t] == -1);
            continue;
          }
          ++pronouns;
          REQUIRE(previous_start >= 0);
          const int64_t a = ante[t];
          REQUIRE((a >= previous_start && a < start));
          const GrammarWord& p = lex[static_cast<size_t>(x[t])];
          auto agrees = [&](int64_t at) {
            const GrammarWord& w = lex[static_cast<size_t>(x[at])];
            return w.word_class == WordClass::noun && w.number == p.number && (p.number == 2 || w.gender == p.gender);
          };
          REQUIRE(agrees(a));
          for (int64_t later = a + 1; later < start; ++later) REQUIRE(!agrees(later));
        }
        previous_start = start;
        start = end + 1;
      }
    }
  }
  INFO(sentences << " sentences, " << pronouns << " pronouns, " << attracted << " verbs after an attractor, "
                 << relative_subjects << " relative-clause subjects");
  CHECK(pronouns > sentences / 10);
  CHECK(attracted > sentences / 10);
  CHECK(relative_subjects > sentences / 20);
}

TEST_CASE("classify labels say whether the second segment is a permutation of the first, half of each",
          "[data][tasks]") {
  TaskOptions o = task("classify", 24, 16);  // items 0..12, CLS 13, SEP 14, PAD 15
  o.min_len = 2;
  o.max_len = 8;
  auto d = make_task(o);
  Batch b = d->make_batch(64);
  for (Split split : {Split::train, Split::val, Split::test}) {
    INFO(split_name(split));
    int64_t ones = 0, rows = 0;
    const int64_t batches = split == Split::train ? 40 : d->eval_batches(split, 64);
    for (int64_t i = 0; i < batches; ++i) {
      d->fill_batch(split, i, b);
      for (int64_t r = 0; r < 64; ++r) {
        const int32_t* x = b.tokens.data() + r * 24;
        const uint8_t* real = b.key_padding.data() + r * 24;
        const int32_t* ante = b.gold_antecedent.data() + r * 24;
        const int64_t n = std::find(x, x + 24, 14) - x - 1;
        REQUIRE((x[0] == 13 && n >= 2 && n <= 8));
        const std::set<int32_t> a(x + 1, x + 1 + n);
        REQUIRE(static_cast<int64_t>(a.size()) == n);  // distinct items
        bool consistent = true;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = n + 2 + j;
          const int32_t* match = std::find(x + 1, x + 1 + n, x[at]);
          consistent = consistent && match != x + 1 + n;
          REQUIRE(ante[at] == (match != x + 1 + n ? match - x : -1));
        }
        for (int64_t t = 0; t < 24; ++t) {
          REQUIRE(real[t] == (t < 2 * n + 2));
          if (t >= 2 * n + 2) REQUIRE(x[t] == 15);
          REQUIRE(b.targets[static_cast<size_t>(r * 24 + t)] == -1);
        }
        REQUIRE(b.labels[static_cast<size_t>(r)] == (consistent ? 1 : 0));
        ones += consistent;
        ++rows;
      }
    }
    if (split == Split::train)
      CHECK(ones * 2 == rows);  // 64-row batches alternate the label
    else
      CHECK(ones == 1024);  // 2048 examples, half of them consistent
  }
}
