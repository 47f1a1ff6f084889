#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/common/paths.h"
#include "headlab/data/bible_pairs.h"
#include "support/scratch.h"
#include "support/skip.h"

using namespace headlab;
namespace fs = std::filesystem;

namespace {

// The real exports, made once per test run in the user cache (CTest points XDG_CACHE_HOME at
// build/test-cache) and read by every test below.
struct RealExport {
  BiblePairsExport corpus;
  std::vector<BiblePair> split[3];
  explicit RealExport(const BiblePairsOptions& options) {
    const auto start = std::chrono::steady_clock::now();
    corpus = ensure_bible_pairs(options);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 1.0) WARN("bible pairs export " << corpus.dir << ": " << seconds << " s");
    for (Split s : {Split::train, Split::val, Split::test})
      split[static_cast<int>(s)] = read_bible_pairs(corpus.split_path(s));
  }
  const BiblePair* find(const std::string& book, int chapter, int verse) const {
    for (const auto& pairs : split)
      for (const BiblePair& p : pairs)
        if (p.book == book && p.chapter == chapter && p.verse == verse) return &p;
    return nullptr;
  }
};

const RealExport& kjv_rv1909() {
  static const RealExport e(BiblePairsOptions{});
  return e;
}

const RealExport& web_rv1909() {
  BiblePairsOptions options;
  options.source_module = "spaRV1909eb";  // the other direction, too
  options.target_module = "engWEB2015eb";
  static const RealExport e(options);
  return e;
}

std::string word(const std::string& text, int index) {
  std::vector<std::string> words;
  size_t from = 0;
  for (size_t space; (space = text.find(' ', from)) != std::string::npos; from = space + 1)
    words.push_back(text.substr(from, space - from));
  words.push_back(text.substr(from));
  return index < static_cast<int>(words.size()) ? words[static_cast<size_t>(index)] : "";
}

// The word indices of `text` tagged with `lemma`.
std::vector<std::string> words_tagged(const std::string& text, const std::vector<std::pair<int, std::string>>& tags,
                                      const std::string& lemma) {
  std::vector<std::string> out;
  for (const auto& [index, l] : tags)
    if (l == lemma) out.push_back(word(text, index));
  return out;
}

}  // namespace

TEST_CASE("KJV and RV1909 pair every verse of the Bible, the empty ones skipped and counted", "[data][bible]") {
  REQUIRE_SWORD();
  const RealExport& e = kjv_rv1909();
  const BiblePairsCounts& c = e.corpus.counts;
  CHECK(c.source_verses == 31102);
  CHECK(c.target_verses == 31102);
  CHECK(c.source_unmatched == 0);
  CHECK(c.target_unmatched == 0);
  CHECK(c.target_empty == 18);
  CHECK(c.empty_pairs == c.source_empty + c.target_empty);
  CHECK(c.train + c.val + c.test + c.duplicates_dropped + c.empty_pairs == 31102);
  for (int s = 0; s < 3; ++s)
    CHECK(static_cast<int64_t>(e.split[s].size()) == (s == 0 ? c.train : s == 1 ? c.val : c.test));
  CHECK(fs::path(e.corpus.dir).parent_path() == user_cache_dir());
}

TEST_CASE("Bible pairs: John 3:16 on both sides, with the Strong's numbers as the word alignment", "[data][bible]") {
  REQUIRE_SWORD();
  const BiblePair* p = kjv_rv1909().find("John", 3, 16);
  REQUIRE(p != nullptr);
  CHECK(p->source ==
        "For God so loved the world, that he gave his only begotten Son, that whosoever believeth in him should not "
        "perish, but have everlasting life.");
  CHECK(p->target ==
        "Porque de tal manera amó Dios al mundo, que ha dado á su Hijo unigénito, para que todo aquel que en él "
        "cree, no se pierda, mas tenga vida eterna.");
  // "everlasting <G0166> life <G2222>" / "vida <G2222> eterna <G0166>": a reordering.
  CHECK(words_tagged(p->source, p->source_tags, "G0166") == std::vector<std::string>{"everlasting"});
  CHECK(words_tagged(p->source, p->source_tags, "G2222") == std::vector<std::string>{"life."});
  CHECK(words_tagged(p->target, p->target_tags, "G2222") == std::vector<std::string>{"vida"});
  CHECK(words_tagged(p->target, p->target_tags, "G0166") == std::vector<std::string>{"eterna."});
  // A phrase carries its lemma on every word: "only begotten <G3439>".
  CHECK(words_tagged(p->source, p->source_tags, "G3439") == std::vector<std::string>{"only", "begotten"});
}

TEST_CASE("Bible pairs: psalm titles stay out of the verses around them", "[data][bible]") {
  REQUIRE_SWORD();
  const RealExport& e = kjv_rv1909();
  const BiblePair* ps3_1 = e.find("Psalms", 3, 1);
  REQUIRE(ps3_1 != nullptr);
  // diatheke prints the KJV title "A Psalm of David, when he fled from Absalom his son." before
  // every verse of the psalm (and stale titles before later verses); it is dropped. RV1909 has it
  // inside verse 1 as verse text.
  CHECK(ps3_1->source == "LORD, how are they increased that trouble me! many are they that rise up against me.");
  CHECK(ps3_1->target ==
        "Salmo de David, cuando huía de delante de Absalom su hijo. ¡OH Jehová, cuánto se han multiplicado mis "
        "enemigos! muchos se levantan contra mí.");
  const BiblePair* ps3_2 = e.find("Psalms", 3, 2);
  REQUIRE(ps3_2 != nullptr);
  CHECK(ps3_2->source == "Many there be which say of my soul, There is no help for him in God. Selah.");
  const BiblePair* mark = e.find("Mark", 1, 1);
  REQUIRE(mark != nullptr);
  CHECK(mark->source == "The beginning of the gospel of Jesus Christ, the Son of God;");
  const BiblePair* john = e.find("John", 3, 16);
  REQUIRE(john != nullptr);
  for (const BiblePair* p : {mark, john, ps3_2}) {
    CHECK(p->source.find("Psalm") == std::string::npos);
    CHECK(p->source.find("praise") == std::string::npos);
  }
  // Book names with spaces.
  const BiblePair* rev = e.find("Revelation of John", 22, 21);
  REQUIRE(rev != nullptr);
  CHECK(rev->source == "The grace of our Lord Jesus Christ be with you all. Amen.");
}

TEST_CASE("Bible pairs: no markup, paragraph mark or stray white space in any exported text", "[data][bible]") {
  REQUIRE_SWORD();
  for (const RealExport* e : {&kjv_rv1909(), &web_rv1909()}) {
    int64_t bad = 0;
    std::string first_bad;
    for (const auto& pairs : e->split)
      for (const BiblePair& p : pairs)
        for (const std::string* text : {&p.source, &p.target}) {
          const bool markup = text->find('<') != std::string::npos || text->find('>') != std::string::npos;
          const bool mark = text->find("\xC2\xB6") != std::string::npos;
          const bool space =
              text->empty() || text->front() == ' ' || text->back() == ' ' || text->find("  ") != std::string::npos;
          if (markup || mark || space) {
            if (bad++ == 0)
              first_bad = p.book + " " + std::to_string(p.chapter) + ":" + std::to_string(p.verse) + ": " + *text;
          }
        }
    INFO(e->corpus.dir << ": first bad text " << first_bad);
    CHECK(bad == 0);
  }
}

TEST_CASE("Bible pairs: WEB against RV1909 aligns by reference and counts what does not match", "[data][bible]") {
  REQUIRE_SWORD();
  const RealExport& e = web_rv1909();
  const BiblePairsCounts& c = e.corpus.counts;
  CHECK(c.source_verses == 31102);  // RV1909
  CHECK(c.target_verses == 37791);  // WEB with the deuterocanon, empty references included
  CHECK(c.target_empty == 334);
  CHECK(c.source_unmatched == 0);              // every RV1909 reference is in the WEB
  CHECK(c.target_unmatched == 37791 - 31102);  // the deuterocanon and a few extra verses
  CHECK(c.empty_pairs == 25);                  // RV1909's 18 and 7 the WEB leaves empty
  CHECK(c.train + c.val + c.test + c.duplicates_dropped + c.empty_pairs == 31102);
  const BiblePair* p = e.find("John", 3, 16);
  REQUIRE(p != nullptr);
  CHECK(p->target.rfind("For God so loved the world, that he gave his only", 0) == 0);
  CHECK(words_tagged(p->target, p->target_tags, "G0166") == std::vector<std::string>{"eternal"});
}

TEST_CASE("Bible pairs: val and test are whole books, and no held-out source verse is a training source verse",
          "[data][bible]") {
  REQUIRE_SWORD();
  for (const RealExport* e : {&kjv_rv1909(), &web_rv1909()}) {
    std::set<std::string> books[3];
    for (int s = 0; s < 3; ++s)
      for (const BiblePair& p : e->split[s]) books[s].insert(p.book);
    CHECK(books[1] == std::set<std::string>{"Ruth"});
    CHECK(books[2] == std::set<std::string>{"Mark"});
    CHECK(books[0].count("Ruth") == 0);
    CHECK(books[0].count("Mark") == 0);
    CHECK(books[0].size() == 64);
    std::set<std::string> train_sources;
    for (const BiblePair& p : e->split[0]) train_sources.insert(p.source);
    int64_t leaked = 0;
    for (int s : {1, 2})
      for (const BiblePair& p : e->split[s]) leaked += train_sources.count(p.source);
    CHECK(leaked == 0);
    CHECK(e->corpus.counts.duplicates_dropped > 0);
  }
}

TEST_CASE("Bible pairs: a second call reads the export without running diatheke", "[data][bible]") {
  REQUIRE_SWORD();
  const RealExport& e = kjv_rv1909();
  const auto written = fs::last_write_time(e.corpus.split_path(Split::train));
  test::ScopedEnv path("PATH", "/nonexistent");
  const BiblePairsExport again = ensure_bible_pairs(BiblePairsOptions{});
  CHECK(again.dir == e.corpus.dir);
  CHECK(again.counts.train == e.corpus.counts.train);
  CHECK(again.counts.duplicates_dropped == e.corpus.counts.duplicates_dropped);
  CHECK(fs::last_write_time(e.corpus.split_path(Split::train)) == written);
}

namespace {

// What ensure_bible_pairs throws with PATH set to `path` and the export into `cache`, or "".
std::string pairs_export_error(const std::string& cache, const std::string& path, BiblePairsOptions options = {}) {
  test::ScopedEnv env("PATH", path.c_str());
  options.cache_dir = cache;
  try {
    ensure_bible_pairs(options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A stand-in `diatheke` in `dir`: lists `modules`, and prints `verses` for any module.
void write_fake_diatheke(const fs::path& dir, const std::string& modules, const std::string& verses, int status) {
  fs::create_directories(dir);
  std::ofstream script(dir / "diatheke");
  script << "#!/bin/sh\nif [ \"$2\" = system ]; then printf '" << modules << "'; exit 0; fi\nprintf '" << verses
         << "'\nexit " << status << "\n";
  script.close();
  fs::permissions(dir / "diatheke", fs::perms::owner_all);
}

void require_one_line(const std::string& error, const std::string& needle) {
  INFO(error);
  CHECK(error.find('\n') == std::string::npos);
  CHECK(error.find(needle) != std::string::npos);
}

}  // namespace

TEST_CASE("Bible pairs: without diatheke or a module the export is one line naming the apt package", "[data][bible]") {
  test::ScratchDir dir("nodiatheke");
  const std::string cache = (dir.dir / "cache").string();
  require_one_line(pairs_export_error(cache, dir.dir.string()), "apt-get install diatheke");
  const fs::path bin = dir.dir / "bin";
  write_fake_diatheke(bin, "Biblical Texts:\\nengKJV2006eb : King James Version\\n", "", 0);
  require_one_line(pairs_export_error(cache, bin.string()), "apt-get install sword-text-sparv");
  BiblePairsOptions web;
  web.target_module = "engWEB2015eb";
  require_one_line(pairs_export_error(cache, bin.string(), web), "apt-get install sword-text-web");
  BiblePairsOptions unknown;
  unknown.target_module = "engASV";
  require_one_line(pairs_export_error(cache, bin.string(), unknown), "unknown SWORD module 'engASV'");
  CHECK_FALSE(fs::exists(cache));
}

TEST_CASE("Bible pairs: a wrong verse count or a failing diatheke leaves nothing behind, in one line",
          "[data][bible]") {
  test::ScratchDir dir("baddiatheke");
  const std::string cache = (dir.dir / "cache").string();
  const std::string modules = "engKJV2006eb : KJV\\nspaRV1909eb : RV\\n";
  const std::string two_verses =
      "Genesis 1:1: <w lemma=\"strong:H7225\">In the beginning</w>\\nGenesis 1:2: And the earth\\n(engKJV2006eb)\\n";
  const fs::path short_bin = dir.dir / "short";
  write_fake_diatheke(short_bin, modules, two_verses, 0);
  require_one_line(pairs_export_error(cache, short_bin.string()), "printed 2 verses, expected 31102");
  const fs::path failing_bin = dir.dir / "failing";
  write_fake_diatheke(failing_bin, modules, two_verses, 3);
  require_one_line(pairs_export_error(cache, failing_bin.string()), "failed (exit status 3)");
  const fs::path garbled_bin = dir.dir / "garbled";
  write_fake_diatheke(garbled_bin, modules, "no reference here\\n", 0);
  require_one_line(pairs_export_error(cache, garbled_bin.string()), "line 1 of");
  CHECK((!fs::exists(cache) || fs::is_empty(cache)));  // no temp folder, no half export
}

TEST_CASE("Bible pairs: a damaged split file is one line naming the file and line", "[data][bible]") {
  test::ScratchDir dir("badpairs");
  const std::string good = "John 3:16\tFor God\tPorque\t0:G1063\t1:G3779\n";
  const auto error_of = [&](const std::string& text) {
    const std::string path = dir.write("train.tsv", text).string();
    try {
      read_bible_pairs(path);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of(good).empty());
  // std::stoi read "x" as an exception of its own and "3x" as 3.
  CHECK_THAT(error_of(good + "John x:16\ta\tb\t\t\n"), Catch::Contains("line 2: chapter 'x' is not a count"));
  CHECK_THAT(error_of(good + "John 3:16x\ta\tb\t\t\n"), Catch::Contains("line 2: verse '16x' is not a count"));
  CHECK_THAT(error_of(good + "John 3:16\ta\tb\tq:G1\t\n"), Catch::Contains("line 2: word index 'q' is not a count"));
  CHECK_THAT(error_of(good + "John 3:16\ta\tb\t99999999999:G1\t\n"), Catch::Contains("is not a count"));
  CHECK_THAT(error_of("John 3:16\ta\tb\n"), Catch::Contains("line 1 has 3 fields, expected 5"));
}
