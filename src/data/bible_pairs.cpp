// The verse-aligned Bible corpus from SWORD modules. See include/headlab/data/bible_pairs.h and
// datasets/README.md "Parallel Bible verses".
//
// Why `diatheke -f OSIS -o n` over the whole Bible in one run: one run costs ~0.05 s of start-up,
// so one per verse would take half an hour per module, while the whole range is one pass (4 s of
// CPU for the KJV). Over a range diatheke repeats a psalm title before every later verse (stale:
// Psalm 145's "David's Psalm of praise" precedes John 3:16), sometimes as raw OSIS markup; in
// `-f plain` such a title may sit on the line after a verse with no blank line between, so it
// cannot be told from a poetry line of the verse. In `-f OSIS` every verse is one line,
// "TITLE  Book C:V: text", and whatever precedes the reference is dropped. The text's words come
// as <w lemma="strong:G0166">everlasting</w>: the Strong's numbers and the clean text (every tag
// removed) are read from the same line.
#include "headlab/data/bible_pairs.h"

#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "headlab/common/error.h"
#include "headlab/common/paths.h"
#include "headlab/common/subprocess.h"

namespace headlab {

namespace fs = std::filesystem;

namespace {

struct ModuleInfo {
  const char* name;
  const char* package;
  int64_t verses;  // lines with a verse reference that `diatheke -f OSIS` prints for the range
};

// Measured on Debian 12 (diatheke 4.8, SWORD 1.9.0). WEB's count includes the deuterocanon and
// 334 references without text (Tobit 6:18, ...).
constexpr ModuleInfo kModules[] = {
    {"engKJV2006eb", "sword-text-kjv", 31102},
    {"engWEB2015eb", "sword-text-web", 37791},
    {"spaRV1909eb", "sword-text-sparv", 31102},
};

// References both modules of a pair print (before empty verses are skipped), per unordered pair.
struct PairInfo {
  const char* a;
  const char* b;
  int64_t matched;
};
constexpr PairInfo kPairs[] = {
    {"engKJV2006eb", "spaRV1909eb", 31102},
    {"engKJV2006eb", "engWEB2015eb", 31102},
    {"engWEB2015eb", "spaRV1909eb", 31102},
};

constexpr const char* kRange = "Genesis 1:1-Revelation 22:21";

// Book names as diatheke prints them (English locale), the deuterocanon of the WEB included.
constexpr const char* kBooks[] = {"Genesis",
                                  "Exodus",
                                  "Leviticus",
                                  "Numbers",
                                  "Deuteronomy",
                                  "Joshua",
                                  "Judges",
                                  "Ruth",
                                  "I Samuel",
                                  "II Samuel",
                                  "I Kings",
                                  "II Kings",
                                  "I Chronicles",
                                  "II Chronicles",
                                  "Ezra",
                                  "Nehemiah",
                                  "Esther",
                                  "Job",
                                  "Psalms",
                                  "Proverbs",
                                  "Ecclesiastes",
                                  "Song of Solomon",
                                  "Isaiah",
                                  "Jeremiah",
                                  "Lamentations",
                                  "Ezekiel",
                                  "Daniel",
                                  "Hosea",
                                  "Joel",
                                  "Amos",
                                  "Obadiah",
                                  "Jonah",
                                  "Micah",
                                  "Nahum",
                                  "Habakkuk",
                                  "Zephaniah",
                                  "Haggai",
                                  "Zechariah",
                                  "Malachi",
                                  "Tobit",
                                  "Judith",
                                  "Esther (Greek)",
                                  "Wisdom",
                                  "Sirach",
                                  "Baruch",
                                  "Prayer of Azariah",
                                  "Susanna",
                                  "Bel and the Dragon",
                                  "I Maccabees",
                                  "II Maccabees",
                                  "I Esdras",
                                  "Prayer of Manasses",
                                  "Additional Psalm",
                                  "III Maccabees",
                                  "II Esdras",
                                  "IV Maccabees",
                                  "Matthew",
                                  "Mark",
                                  "Luke",
                                  "John",
                                  "Acts",
                                  "Romans",
                                  "I Corinthians",
                                  "II Corinthians",
                                  "Galatians",
                                  "Ephesians",
                                  "Philippians",
                                  "Colossians",
                                  "I Thessalonians",
                                  "II Thessalonians",
                                  "I Timothy",
                                  "II Timothy",
                                  "Titus",
                                  "Philemon",
                                  "Hebrews",
                                  "James",
                                  "I Peter",
                                  "II Peter",
                                  "I John",
                                  "II John",
                                  "III John",
                                  "Jude",
                                  "Revelation of John"};

const ModuleInfo& module_info(const std::string& name) {
  for (const ModuleInfo& m : kModules)
    if (name == m.name) return m;
  HEADLAB_CHECK(false,
                "bible pairs: unknown SWORD module '" << name << "' (known: engKJV2006eb, engWEB2015eb, spaRV1909eb)");
  return kModules[0];
}

int64_t expected_matches(const std::string& a, const std::string& b) {
  for (const PairInfo& p : kPairs)
    if ((a == p.a && b == p.b) || (a == p.b && b == p.a)) return p.matched;
  return -1;
}

bool is_book(const std::string& name) {
  return std::any_of(std::begin(kBooks), std::end(kBooks), [&](const char* b) { return name == b; });
}

struct Verse {
  std::string book;
  int chapter = 0, verse = 0;
  std::string text;
  std::vector<std::pair<int, std::string>> tags;
};

// Finds "Book C:V: " in `line`: the first "C:V: " preceded by a known book name that starts the
// line or follows a space or '>'. Returns the offset of the text after it, or npos.
size_t find_reference(std::string_view line, Verse& verse) {
  for (size_t colon = line.find(": "); colon != std::string_view::npos; colon = line.find(": ", colon + 1)) {
    size_t i = colon;
    auto digits_back = [&] {
      const size_t end = i;
      while (i > 0 && line[i - 1] >= '0' && line[i - 1] <= '9') --i;
      return end - i;
    };
    const size_t verse_end = i, verse_digits = digits_back();
    if (verse_digits == 0 || verse_digits > 4 || i == 0 || line[i - 1] != ':') continue;  // stoi cannot overflow
    const size_t verse_begin = i--;
    const size_t chapter_end = i, chapter_digits = digits_back();
    if (chapter_digits == 0 || chapter_digits > 4 || i == 0 || line[i - 1] != ' ') continue;
    const size_t chapter_begin = i;
    const std::string_view before = line.substr(0, chapter_begin - 1);
    size_t best = 0;
    for (const char* book : kBooks) {
      const size_t n = std::strlen(book);
      if (n <= best || before.size() < n || before.substr(before.size() - n) != book) continue;
      const size_t start = before.size() - n;
      if (start == 0 || before[start - 1] == ' ' || before[start - 1] == '>') best = n;
    }
    if (best == 0) continue;
    verse.book = std::string(before.substr(before.size() - best));
    verse.chapter = std::stoi(std::string(line.substr(chapter_begin, chapter_end - chapter_begin)));
    verse.verse = std::stoi(std::string(line.substr(verse_begin, verse_end - verse_begin)));
    return colon + 2;
  }
  return std::string_view::npos;
}

// The text after the reference: every tag removed (the contents of <title> and <note> too), the
// paragraph mark dropped, words split on white space and joined by one space; each word gets the
// lemmas of the <w lemma="strong:..."> elements its characters came from.
void parse_verse_text(std::string_view osis, Verse& verse) {
  std::vector<std::vector<std::string>> lemma_sets;
  std::string chars;
  std::vector<int> char_lemmas;  // per byte of `chars`: index into lemma_sets, or -1
  int current = -1, hidden_depth = 0;
  for (size_t i = 0; i < osis.size();) {
    if (osis[i] == '<') {
      const size_t end = osis.find('>', i);
      const std::string_view tag = osis.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i + 1);
      i = end == std::string_view::npos ? osis.size() : end + 1;
      auto named = [&](const char* name) {
        const size_t n = std::strlen(name);
        return tag.size() > n + 1 && tag.compare(1, n, name) == 0 && (tag[n + 1] == ' ' || tag[n + 1] == '>');
      };
      const bool self_closing = tag.size() >= 2 && tag[tag.size() - 2] == '/';
      if ((named("title") || named("note")) && !self_closing) ++hidden_depth;
      if ((named("/title") || named("/note")) && hidden_depth > 0) --hidden_depth;
      if (named("w")) {
        current = -1;
        const size_t at = tag.find("lemma=\"");
        if (at != std::string_view::npos) {
          const size_t from = at + 7, to = tag.find('"', from);
          std::istringstream lemmas(std::string(tag.substr(from, to - from)));
          std::vector<std::string> set;
          for (std::string lemma; lemmas >> lemma;) {
            if (lemma.rfind("strong:", 0) == 0) lemma.erase(0, 7);
            if (!lemma.empty()) set.push_back(lemma);
          }
          if (!set.empty()) {
            lemma_sets.push_back(std::move(set));
            current = static_cast<int>(lemma_sets.size()) - 1;
          }
        }
        if (self_closing) current = -1;
      }
      if (named("/w")) current = -1;
      chars += ' ';  // a tag separates words only where the text has a space: see below
      char_lemmas.push_back(-2);
      continue;
    }
    if (hidden_depth == 0) {
      chars += osis[i];
      char_lemmas.push_back(current);
    }
    ++i;
  }
  // Words: runs of characters that are not white space; a tag's placeholder (-2) joins the text
  // on both sides ("born<w ...>Son</w>" is the module's own "bornSon").
  std::string word;
  std::vector<int> word_sets;
  int words = 0;
  auto flush = [&] {
    // The paragraph mark U+00B6 is layout, not text.
    for (size_t at; (at = word.find("\xC2\xB6")) != std::string::npos;) word.erase(at, 2);
    if (!word.empty()) {
      const int index = words++;
      if (!verse.text.empty()) verse.text += ' ';
      verse.text += word;
      for (int set : word_sets)
        for (const std::string& lemma : lemma_sets[static_cast<size_t>(set)]) verse.tags.emplace_back(index, lemma);
    }
    word.clear();
    word_sets.clear();
  };
  for (size_t i = 0; i < chars.size(); ++i) {
    const int set = char_lemmas[i];
    if (set == -2) continue;
    const char c = chars[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      flush();
      continue;
    }
    word += c;
    if (set >= 0 && std::find(word_sets.begin(), word_sets.end(), set) == word_sets.end()) word_sets.push_back(set);
  }
  flush();
}

std::string exit_problem(int status) {
  return "exit status " + std::to_string(status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

// `diatheke -b system -k modulelist` lists "name : description" lines.
std::set<std::string> installed_modules() {
  ChildProcess diatheke;
  diatheke.args = {"diatheke", "-b", "system", "-k", "modulelist"};
  diatheke.env = current_environment();
  std::set<std::string> names;
  const int status = run_child_reading_lines(diatheke, [&](std::string_view line) {
    const size_t sep = line.find(" : ");
    if (sep != std::string_view::npos) names.emplace(line.substr(0, sep));
  });
  HEADLAB_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "bible pairs: `diatheke -b system -k modulelist` failed (" << exit_problem(status) << ")");
  return names;
}

std::vector<Verse> export_module(const ModuleInfo& module) {
  ChildProcess diatheke;
  diatheke.args = {"diatheke", "-b", module.name, "-f", "OSIS", "-o", "n", "-k", kRange};
  diatheke.env = current_environment();
  std::vector<Verse> verses;
  int64_t line_number = 0, unreferenced_line = 0;
  const std::string module_line = std::string("(") + module.name + ")";
  const int status = run_child_reading_lines(diatheke, [&](std::string_view line) {
    ++line_number;
    if (line.empty() || line == module_line) return;
    Verse verse;
    const size_t text = find_reference(line, verse);
    if (text == std::string_view::npos) {
      if (unreferenced_line == 0) unreferenced_line = line_number;
      return;
    }
    parse_verse_text(line.substr(text), verse);
    verses.push_back(std::move(verse));
  });
  const std::string command = std::string("`diatheke -b ") + module.name + " -f OSIS -o n -k \"" + kRange + "\"`";
  HEADLAB_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                "bible pairs: " << command << " failed (" << exit_problem(status) << ")");
  HEADLAB_CHECK(unreferenced_line == 0,
                "bible pairs: line " << unreferenced_line << " of " << command << " has no verse reference");
  HEADLAB_CHECK(static_cast<int64_t>(verses.size()) == module.verses,
                "bible pairs: " << command << " printed " << verses.size() << " verses, expected " << module.verses);
  return verses;
}

std::string reference(const std::string& book, int chapter, int verse) {
  return book + " " + std::to_string(chapter) + ":" + std::to_string(verse);
}

std::string tags_field(const std::vector<std::pair<int, std::string>>& tags) {
  std::string out;
  for (const auto& [word, lemma] : tags) {
    if (!out.empty()) out += ' ';
    out += std::to_string(word) + ":" + lemma;
  }
  return out;
}

std::string folder_part(std::string s) {
  std::replace(s.begin(), s.end(), ' ', '_');
  return s;
}

constexpr const char* kCountNames[] = {"source_verses",
                                       "target_verses",
                                       "source_empty",
                                       "target_empty",
                                       "source_unmatched",
                                       "target_unmatched",
                                       "empty_pairs",
                                       "duplicates_dropped",
                                       "train",
                                       "val",
                                       "test"};

std::vector<int64_t*> count_fields(BiblePairsCounts& c) {
  return {&c.source_verses,
          &c.target_verses,
          &c.source_empty,
          &c.target_empty,
          &c.source_unmatched,
          &c.target_unmatched,
          &c.empty_pairs,
          &c.duplicates_dropped,
          &c.train,
          &c.val,
          &c.test};
}

// counts.txt: "name value" lines, in kCountNames order.
void write_counts(const fs::path& path, BiblePairsCounts counts) {
  std::ofstream out(path);
  const std::vector<int64_t*> fields = count_fields(counts);
  for (size_t i = 0; i < fields.size(); ++i) out << kCountNames[i] << ' ' << *fields[i] << '\n';
  HEADLAB_CHECK(out.flush(), "bible pairs: cannot write " << path.string());
}

BiblePairsCounts read_counts(const fs::path& path) {
  BiblePairsCounts counts;
  std::ifstream in(path);
  HEADLAB_CHECK(in, "bible pairs: cannot read " << path.string());
  std::map<std::string, int64_t> values;
  std::string name;
  for (int64_t value; in >> name >> value;) values[name] = value;
  const std::vector<int64_t*> fields = count_fields(counts);
  for (size_t i = 0; i < fields.size(); ++i) {
    const auto it = values.find(kCountNames[i]);
    HEADLAB_CHECK(it != values.end(), "bible pairs: " << path.string() << " has no " << kCountNames[i]);
    *fields[i] = it->second;
  }
  return counts;
}

}  // namespace

std::string BiblePairsExport::split_path(Split split) const {
  return (fs::path(dir) / (std::string(split_name(split)) + ".tsv")).string();
}

BiblePairsExport ensure_bible_pairs(const BiblePairsOptions& options) {
  const ModuleInfo& source_module = module_info(options.source_module);
  const ModuleInfo& target_module = module_info(options.target_module);
  HEADLAB_CHECK(options.source_module != options.target_module,
                "bible pairs: source and target are both " << options.source_module);
  for (const std::string& book : {options.val_book, options.test_book})
    HEADLAB_CHECK(is_book(book), "bible pairs: '" << book << "' is not a book name diatheke prints (e.g. 'Ruth', "
                                                  << "'I Samuel', 'Revelation of John')");
  HEADLAB_CHECK(options.val_book != options.test_book, "bible pairs: val and test are both " << options.val_book);

  const fs::path cache = options.cache_dir.empty() ? user_cache_dir() : fs::path(options.cache_dir);
  BiblePairsExport result;
  result.dir = (cache / ("bible-pairs-" + options.source_module + "-" + options.target_module + "-val-" +
                         folder_part(options.val_book) + "-test-" + folder_part(options.test_book)))
                   .string();
  const fs::path counts_path = fs::path(result.dir) / "counts.txt";
  std::error_code ec;
  if (fs::exists(counts_path, ec)) {
    result.counts = read_counts(counts_path);
    return result;
  }

  HEADLAB_CHECK(program_on_path("diatheke"), "bible pairs: the `diatheke` program is not installed, so "
                                                 << result.dir << " cannot be exported: apt-get install diatheke");
  const std::set<std::string> installed = installed_modules();
  for (const ModuleInfo* m : {&source_module, &target_module})
    HEADLAB_CHECK(installed.count(m->name),
                  "bible pairs: the SWORD module " << m->name << " is not installed: apt-get install " << m->package);

  const std::vector<Verse> source = export_module(source_module);
  std::vector<Verse> target = export_module(target_module);
  BiblePairsCounts& counts = result.counts;
  counts.source_verses = static_cast<int64_t>(source.size());
  counts.target_verses = static_cast<int64_t>(target.size());
  for (const Verse& v : source) counts.source_empty += v.text.empty();
  for (const Verse& v : target) counts.target_empty += v.text.empty();

  std::unordered_map<std::string, size_t> target_at;
  for (size_t i = 0; i < target.size(); ++i)
    target_at.emplace(reference(target[i].book, target[i].chapter, target[i].verse), i);
  struct Pair {
    const Verse* source;
    const Verse* target;
  };
  std::vector<Pair> splits[3];
  int64_t matched = 0;
  for (const Verse& s : source) {
    const auto it = target_at.find(reference(s.book, s.chapter, s.verse));
    if (it == target_at.end()) {
      ++counts.source_unmatched;
      continue;
    }
    ++matched;
    const Verse& t = target[it->second];
    if (s.text.empty() || t.text.empty()) {
      ++counts.empty_pairs;
      continue;
    }
    const Split split = s.book == options.val_book    ? Split::val
                        : s.book == options.test_book ? Split::test
                                                      : Split::train;
    splits[static_cast<int>(split)].push_back({&s, &t});
  }
  counts.target_unmatched = counts.target_verses - matched;
  const int64_t expected = expected_matches(options.source_module, options.target_module);
  HEADLAB_CHECK(matched == expected, "bible pairs: " << options.source_module << " and " << options.target_module
                                                     << " share " << matched << " verse references, expected "
                                                     << expected);

  // No val or test source verse identical to a training source verse.
  std::unordered_set<std::string> train_sources;
  for (const Pair& p : splits[0]) train_sources.insert(p.source->text);
  for (int split : {1, 2}) {
    std::vector<Pair>& pairs = splits[split];
    const size_t before = pairs.size();
    pairs.erase(std::remove_if(pairs.begin(), pairs.end(),
                               [&](const Pair& p) { return train_sources.count(p.source->text) > 0; }),
                pairs.end());
    counts.duplicates_dropped += static_cast<int64_t>(before - pairs.size());
  }
  counts.train = static_cast<int64_t>(splits[0].size());
  counts.val = static_cast<int64_t>(splits[1].size());
  counts.test = static_cast<int64_t>(splits[2].size());

  // A private temp folder renamed into place: a reader, or a second export at the same time,
  // sees no folder or the whole one.
  fs::create_directories(cache, ec);
  HEADLAB_CHECK(!ec, "bible pairs: cannot create directory " << cache.string() << ": " << ec.message());
  const fs::path tmp = result.dir + ".tmp." + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  HEADLAB_CHECK(!ec, "bible pairs: cannot create directory " << tmp.string() << ": " << ec.message());
  try {
    for (Split split : {Split::train, Split::val, Split::test}) {
      const fs::path path = tmp / (std::string(split_name(split)) + ".tsv");
      std::ofstream out(path, std::ios::binary);
      for (const Pair& p : splits[static_cast<int>(split)])
        out << reference(p.source->book, p.source->chapter, p.source->verse) << '\t' << p.source->text << '\t'
            << p.target->text << '\t' << tags_field(p.source->tags) << '\t' << tags_field(p.target->tags) << '\n';
      HEADLAB_CHECK(out.flush(), "bible pairs: cannot write " << path.string());
    }
    write_counts(tmp / "counts.txt", counts);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fs::rename(tmp, result.dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    // Another export renamed its folder first: it is the same content.
    HEADLAB_CHECK(fs::exists(counts_path),
                  "bible pairs: cannot rename " << tmp.string() << " to " << result.dir << ": " << ec.message());
  }
  return result;
}

std::vector<BiblePair> read_bible_pairs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  HEADLAB_CHECK(in, "bible pairs: cannot read " << path << ": " << std::strerror(errno));
  std::vector<BiblePair> pairs;
  int64_t line_number = 0;
  // A whole field as a non-negative int (std::stoi would take "3x" and throw its own exception
  // on "x").
  auto count = [&](const std::string& text, const char* what) {
    int value = -1;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    HEADLAB_CHECK(
        ec == std::errc() && end == text.data() + text.size() && value >= 0,
        "bible pairs: " << path << " line " << line_number << ": " << what << " '" << text << "' is not a count");
    return value;
  };
  auto parse_tags = [&](const std::string& field, std::vector<std::pair<int, std::string>>& tags) {
    std::istringstream entries(field);
    for (std::string entry; entries >> entry;) {
      const size_t colon = entry.find(':');
      HEADLAB_CHECK(colon != std::string::npos && colon > 0,
                    "bible pairs: " << path << " line " << line_number << ": bad tag '" << entry << "'");
      tags.emplace_back(count(entry.substr(0, colon), "word index"), entry.substr(colon + 1));
    }
  };
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    std::vector<std::string> fields;
    for (size_t from = 0;;) {
      const size_t tab = line.find('\t', from);
      fields.push_back(line.substr(from, tab == std::string::npos ? std::string::npos : tab - from));
      if (tab == std::string::npos) break;
      from = tab + 1;
    }
    HEADLAB_CHECK(fields.size() == 5, "bible pairs: " << path << " line " << line_number << " has " << fields.size()
                                                      << " fields, expected 5");
    BiblePair pair;
    const size_t space = fields[0].rfind(' '), colon = fields[0].rfind(':');
    HEADLAB_CHECK(space != std::string::npos && colon != std::string::npos && colon > space,
                  "bible pairs: " << path << " line " << line_number << ": bad reference '" << fields[0] << "'");
    pair.book = fields[0].substr(0, space);
    pair.chapter = count(fields[0].substr(space + 1, colon - space - 1), "chapter");
    pair.verse = count(fields[0].substr(colon + 1), "verse");
    pair.source = fields[1];
    pair.target = fields[2];
    parse_tags(fields[3], pair.source_tags);
    parse_tags(fields[4], pair.target_tags);
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

}  // namespace headlab
