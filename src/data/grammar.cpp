// A small probabilistic grammar of English-like sentences with gold dependency heads,
// pronoun antecedents and delimiters (datasets/README.md has the lexicon and the rules).
//   S      -> NP_subj[n] V[n] (NP_obj) "."          n = singular | plural, 1/2 each
//   NP[n]  -> Det[n] N[n] (Mod) | Pronoun[n]        Det: "the", or "a" when singular
//   Mod    -> P Det N                               "the dog near the cats"
//           | "that" V[n] (Det N)                   "the dog that sees the cats"
//           | "that" Det N[m] Vt[m]                 "the dogs that the cat sees"
// Every verb agrees with its subject; a modifier's noun has its own random number, so it is an
// agreement attractor half the time. Modifiers do not nest. A pronoun may stand for a subject or
// object NP when the previous sentence of the row has a noun: the generator picks one of those
// nouns, emits the pronoun of its number and gender (he/she/it/they, him/her/it/them), and the
// gold antecedent is the LAST noun of the previous sentence with that number (and, singular,
// gender): the rule a reader would apply. Heads follow Universal Dependencies: det -> noun,
// subject and object -> verb, the main verb is the root (-1), "." -> the main verb, preposition
// -> its noun -> the noun it modifies, relative verb -> the noun it modifies, "that" -> the
// relative verb. A row packs whole sentences into T+1 tokens (tokens x[0..T), targets x[1..T])
// and pads the rest (<pad>, target -1, no annotations).
#include <array>
#include <sstream>

#include "headlab/common/error.h"
#include "headlab/data/tasks.h"

namespace headlab {

namespace {

enum FunctionWord : int32_t {
  kPad,
  kDot,
  kThe,
  kA,
  kThat,
  kNear,
  kWith,
  kBehind,
  kHe,
  kShe,
  kIt,
  kThey,
  kHim,
  kHer,
  kThem,
  kFunctionWords
};
constexpr int64_t kMinVocab = kFunctionWords + 10;  // + man, woman, dog, runs, sees (each in two numbers)
constexpr int kMaxSentence = 16;                    // the longest sentence has 14 tokens

// Production probabilities.
constexpr double kPronoun = 0.3;          // a subject/object NP is a pronoun, when one can refer
constexpr double kSubjectModifier = 0.6;  // a full subject NP carries a modifier
constexpr double kObjectModifier = 0.25;
constexpr double kTransitive = 0.5;  // a verb takes an object

struct ContentEntry {
  const char* singular;
  const char* plural;
  WordClass word_class;
  Gender gender;
  bool transitive;
};
// Added in this order as the vocabulary grows, so a small vocabulary keeps every category.
constexpr ContentEntry kContent[] = {
    {"man", "men", WordClass::noun, Gender::masculine, false},
    {"woman", "women", WordClass::noun, Gender::feminine, false},
    {"dog", "dogs", WordClass::noun, Gender::neuter, false},
    {"runs", "run", WordClass::verb, Gender::none, false},
    {"sees", "see", WordClass::verb, Gender::none, true},
    {"boy", "boys", WordClass::noun, Gender::masculine, false},
    {"girl", "girls", WordClass::noun, Gender::feminine, false},
    {"cat", "cats", WordClass::noun, Gender::neuter, false},
    {"sleeps", "sleep", WordClass::verb, Gender::none, false},
    {"likes", "like", WordClass::verb, Gender::none, true},
    {"king", "kings", WordClass::noun, Gender::masculine, false},
    {"queen", "queens", WordClass::noun, Gender::feminine, false},
    {"bird", "birds", WordClass::noun, Gender::neuter, false},
    {"sings", "sing", WordClass::verb, Gender::none, false},
    {"follows", "follow", WordClass::verb, Gender::none, true},
    {"horse", "horses", WordClass::noun, Gender::neuter, false},
    {"falls", "fall", WordClass::verb, Gender::none, false},
    {"helps", "help", WordClass::verb, Gender::none, true},
};
constexpr int64_t kDefaultVocab = kFunctionWords + 2 * static_cast<int64_t>(std::size(kContent));  // 51

// One sentence under construction; positions are relative to its first token until committed.
struct Sentence {
  std::array<int32_t, kMaxSentence> word{}, head{}, antecedent{};
  int n = 0;
  int append(int32_t w, int32_t h = -1) {
    word[n] = w;
    head[n] = h;
    antecedent[n] = -1;
    return n++;
  }
};

// Nouns of the previous sentence: absolute row positions and token ids.
struct NounList {
  std::array<int32_t, kMaxSentence> position{}, word{};
  int n = 0;
};

class GrammarTask : public SyntheticTask {
 public:
  explicit GrammarTask(const TaskOptions& o) : SyntheticTask(o), lexicon_(grammar_lexicon(o.vocab_size)) {
    HEADLAB_CHECK(seq_len_ >= kMaxSentence,
                  "grammar: data.seq_len=" << seq_len_ << " is below " << kMaxSentence << ", the longest sentence");
    for (int32_t id = 0; id < static_cast<int32_t>(lexicon_.size()); ++id) {
      const GrammarWord& w = lexicon_[static_cast<size_t>(id)];
      if (w.number != 1) continue;
      if (w.word_class == WordClass::noun) nouns_.push_back(id);
      if (w.word_class == WordClass::verb) (w.transitive ? transitive_ : intransitive_).push_back(id);
    }
  }

  std::string name() const override { return "grammar(vocab=" + std::to_string(lexicon_.size()) + ")"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(lexicon_.size()); }
  bool has_accuracy() const override { return false; }         // the next word is a choice, not an answer
  int32_t unkeyed_pad_token() const override { return kPad; }  // sentences end early: <pad> fills the row
  std::string token_label(int32_t token) const override {
    return token >= 0 && token < static_cast<int32_t>(lexicon_.size()) ? lexicon_[static_cast<size_t>(token)].text
                                                                       : std::to_string(token);
  }
  BatchLayout batch_layout() const override {
    BatchLayout layout;
    layout.gold_head = true;
    layout.gold_antecedent = true;
    layout.is_delimiter = true;
    return layout;
  }

 protected:
  void generate(RowRng& rng, int64_t, const ExampleView& row) const override {
    const int64_t T = row.seq_len;
    NounList previous;
    Sentence s;
    for (int64_t start = 0;;) {
      s.n = 0;
      sentence(rng, previous, s);
      if (start + s.n > T + 1) break;  // whole sentences only: the rest of the row is padding
      previous.n = 0;
      for (int i = 0; i < s.n; ++i) {
        const int64_t at = start + i;
        const int32_t w = s.word[static_cast<size_t>(i)];
        if (at >= 1) row.targets[at - 1] = w;
        if (at >= T) continue;
        row.tokens[at] = w;
        const int32_t h = s.head[static_cast<size_t>(i)];
        row.gold_head[at] = h < 0 ? -1 : static_cast<int32_t>(start + h);
        row.gold_antecedent[at] = s.antecedent[static_cast<size_t>(i)];
        row.is_delimiter[at] = w == kDot;
        if (lexicon_[static_cast<size_t>(w)].word_class == WordClass::noun) {
          previous.position[static_cast<size_t>(previous.n)] = static_cast<int32_t>(at);
          previous.word[static_cast<size_t>(previous.n++)] = w;
        }
      }
      start += s.n;
    }
  }

 private:
  bool chance(RowRng& rng, double p) const { return rng.uniform() < p; }
  int32_t pick(RowRng& rng, const std::vector<int32_t>& ids) const {
    return ids[static_cast<size_t>(rng.below(ids.size()))];
  }
  int number(RowRng& rng) const { return 1 + static_cast<int>(rng.below(2)); }
  // The singular id plus one is the plural form.
  int32_t noun(RowRng& rng, int num) const { return pick(rng, nouns_) + (num == 2); }
  int32_t verb(RowRng& rng, int num, bool transitive) const {
    return pick(rng, transitive ? transitive_ : intransitive_) + (num == 2);
  }
  int32_t determiner(RowRng& rng, int num) const { return num == 1 && rng.below(2) ? kA : kThe; }

  // "Det N" with its det attached; returns the noun's position.
  int simple_np(RowRng& rng, int num, Sentence& s) const {
    const int d = s.append(determiner(rng, num));
    const int n = s.append(noun(rng, num));
    s.head[static_cast<size_t>(d)] = n;
    return n;
  }

  // A full NP of number num, optionally modified; returns its head noun's position.
  int full_np(RowRng& rng, int num, double modifier, Sentence& s) const {
    const int n = simple_np(rng, num, s);
    if (!chance(rng, modifier)) return n;
    switch (rng.below(3)) {
      case 0: {  // P Det N
        const int p = s.append(kNear + static_cast<int32_t>(rng.below(3)));
        const int m = simple_np(rng, number(rng), s);
        s.head[static_cast<size_t>(p)] = m;
        s.head[static_cast<size_t>(m)] = n;
        break;
      }
      case 1: {  // "that" V[num] (Det N): subject relative
        const int c = s.append(kThat);
        const bool transitive = chance(rng, kTransitive);
        const int v = s.append(verb(rng, num, transitive), n);
        s.head[static_cast<size_t>(c)] = v;
        if (transitive) s.head[static_cast<size_t>(simple_np(rng, number(rng), s))] = v;
        break;
      }
      default: {  // "that" Det N[m] Vt[m]: object relative
        const int c = s.append(kThat);
        const int rc_num = number(rng);
        const int m = simple_np(rng, rc_num, s);
        const int v = s.append(verb(rng, rc_num, true), n);
        s.head[static_cast<size_t>(c)] = v;
        s.head[static_cast<size_t>(m)] = v;
        break;
      }
    }
    return n;
  }

  // A pronoun for a random noun of the previous sentence; sets its antecedent, returns its
  // position and (through num) its number.
  int pronoun(RowRng& rng, const NounList& previous, bool subject, int& num, Sentence& s) const {
    const GrammarWord& chosen =
        lexicon_[static_cast<size_t>(previous.word[rng.below(static_cast<uint64_t>(previous.n))])];
    num = chosen.number;
    int32_t w = subject ? kThey : kThem;
    if (num == 1) {
      if (chosen.gender == Gender::masculine)
        w = subject ? kHe : kHim;
      else if (chosen.gender == Gender::feminine)
        w = subject ? kShe : kHer;
      else
        w = kIt;
    }
    const int at = s.append(w);
    for (int i = previous.n - 1; i >= 0; --i) {
      const GrammarWord& candidate = lexicon_[static_cast<size_t>(previous.word[static_cast<size_t>(i)])];
      if (candidate.number == num && (num == 2 || candidate.gender == chosen.gender)) {
        s.antecedent[static_cast<size_t>(at)] = previous.position[static_cast<size_t>(i)];
        break;
      }
    }
    return at;
  }

  void sentence(RowRng& rng, const NounList& previous, Sentence& s) const {
    int num = 0;
    const int subj = previous.n > 0 && chance(rng, kPronoun) ? pronoun(rng, previous, true, num, s)
                                                             : full_np(rng, num = number(rng), kSubjectModifier, s);
    const bool transitive = chance(rng, kTransitive);
    const int v = s.append(verb(rng, num, transitive));  // the root: head -1
    s.head[static_cast<size_t>(subj)] = v;
    if (transitive) {
      int obj_num = 0;
      const int obj = previous.n > 0 && chance(rng, kPronoun) ? pronoun(rng, previous, false, obj_num, s)
                                                              : full_np(rng, number(rng), kObjectModifier, s);
      s.head[static_cast<size_t>(obj)] = v;
    }
    s.append(kDot, v);
  }

  std::vector<GrammarWord> lexicon_;
  std::vector<int32_t> nouns_, intransitive_, transitive_;  // singular ids
};

}  // namespace

std::vector<GrammarWord> grammar_lexicon(int64_t vocab_size) {
  const int64_t V = vocab_size ? vocab_size : kDefaultVocab;
  HEADLAB_CHECK(V >= kMinVocab,
                "grammar: data.vocab_size=" << V << " is below the " << kMinVocab << " words the grammar needs");
  std::vector<GrammarWord> lex = {
      {"<pad>", WordClass::pad},
      {".", WordClass::delimiter},
      {"the", WordClass::determiner, 0},
      {"a", WordClass::determiner, 1},
      {"that", WordClass::complementizer},
      {"near", WordClass::preposition},
      {"with", WordClass::preposition},
      {"behind", WordClass::preposition},
      {"he", WordClass::pronoun, 1, Gender::masculine},
      {"she", WordClass::pronoun, 1, Gender::feminine},
      {"it", WordClass::pronoun, 1, Gender::neuter},
      {"they", WordClass::pronoun, 2},
      {"him", WordClass::pronoun, 1, Gender::masculine},
      {"her", WordClass::pronoun, 1, Gender::feminine},
      {"them", WordClass::pronoun, 2},
  };
  const int64_t pairs = (V - kFunctionWords) / 2;
  for (int64_t i = 0; i < pairs; ++i) {
    ContentEntry e;
    std::string singular, plural;
    if (i < static_cast<int64_t>(std::size(kContent))) {
      e = kContent[i];
      singular = e.singular;
      plural = e.plural;
    } else {  // beyond the named words: nouns cycling through the genders, alternating with verbs
      const int64_t j = i - static_cast<int64_t>(std::size(kContent));
      const bool is_noun = j % 2 == 0;
      e = {nullptr, nullptr, is_noun ? WordClass::noun : WordClass::verb,
           is_noun ? static_cast<Gender>(1 + (j / 2) % 3) : Gender::none, !is_noun && (j / 2) % 2 == 1};
      singular = is_noun ? "noun" + std::to_string(i) : "verb" + std::to_string(i) + "s";
      plural = is_noun ? "noun" + std::to_string(i) + "s" : "verb" + std::to_string(i);
    }
    const auto id = static_cast<int32_t>(lex.size());
    lex.push_back({singular, e.word_class, 1, e.gender, e.transitive, id + 1});
    lex.push_back({plural, e.word_class, 2, e.gender, e.transitive, id});
  }
  return lex;
}

std::unique_ptr<SyntheticTask> make_grammar_task(const TaskOptions& options) {
  return std::make_unique<GrammarTask>(options);
}

}  // namespace headlab
