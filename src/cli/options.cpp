#include "options.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "headlab/common/edit_distance.h"

namespace headlab::cli {

namespace {

// The option (as typed, "--tokens" or "-j") and value cxxopts could not parse, found by parsing
// each option alone: cxxopts's exception names only the value, which may appear more than once.
std::optional<std::pair<std::string, std::string>> bad_value(cxxopts::Options& options, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    // The value follows '=' (--tokens=abc), the letter of a short option (-jx), or is the next
    // argument (--tokens abc, -j x).
    const bool is_short = arg[1] != '-';
    const size_t value_at = is_short ? (arg.size() > 2 ? 2 : std::string::npos) : arg.find('=');
    std::vector<const char*> alone = {argv[0], argv[i]};
    if (value_at == std::string::npos && i + 1 < argc) alone.push_back(argv[i + 1]);
    try {
      options.parse(static_cast<int>(alone.size()), alone.data());
    } catch (const cxxopts::exceptions::incorrect_argument_type&) {
      if (value_at == std::string::npos) return std::pair{arg, std::string(alone.back())};
      return std::pair{arg.substr(0, is_short ? 2 : value_at), arg.substr(is_short ? 2 : value_at + 1)};
    } catch (const cxxopts::exceptions::exception&) {
      // another problem of this argument (or a negative number read as an option): not this one
    }
  }
  return std::nullopt;
}

// The first option in argv that `options` does not know, with the nearest it does know if that
// looks like a typo: "unknown option '--bach'; did you mean '--batch'?". Empty if all are known.
std::string unknown_option(const cxxopts::Options& options, int argc, char** argv) {
  std::vector<std::string> known, known_long;
  for (const std::string& group : options.groups())
    for (const cxxopts::HelpOptionDetails& o : options.group_help(group).options) {
      if (!o.s.empty()) known.push_back("-" + o.s);
      for (const std::string& l : o.l) known_long.push_back("--" + l);
    }
  known.insert(known.end(), known_long.begin(), known_long.end());
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-' || (arg[1] != '-' && !std::isalpha(static_cast<unsigned char>(arg[1]))))
      continue;
    const std::string name = arg.substr(0, arg.find('='));
    // "-j2" is -j with its value to cxxopts: a short option is judged by its first letter.
    const bool is_known =
        std::find(known.begin(), known.end(), arg[1] == '-' ? name : name.substr(0, 2)) != known.end();
    if (is_known) continue;
    // A one-letter option is too short for a guess at what was meant.
    const std::string suggestion = arg[1] == '-' ? closest_name(name, known_long) : "";
    return "unknown option '" + name + "'" +
           (suggestion.empty() ? " (see " + options.program() + " --help)" : "; did you mean '" + suggestion + "'?");
  }
  return "";
}

}  // namespace

std::optional<cxxopts::ParseResult> parse_options(cxxopts::Options& options, const std::vector<std::string>& positional,
                                                  int argc, char** argv) {
  options.parse_positional(positional);
  std::optional<cxxopts::ParseResult> args;
  try {
    args = options.parse(argc, argv);
  } catch (const cxxopts::exceptions::incorrect_argument_type&) {
    const auto bad = bad_value(options, argc, argv);
    if (!bad) throw;
    throw Error("invalid value '" + escaped(bad->second) + "' for " + bad->first + " (see " + options.program() +
                " --help)");
  } catch (const cxxopts::exceptions::no_such_option&) {
    const std::string message = unknown_option(options, argc, argv);
    if (message.empty()) throw;
    throw Error(message);
  }
  if (args->count("help")) {
    std::printf("%s\n", options.help().c_str());
    return std::nullopt;
  }
  HEADLAB_CHECK(args->unmatched().empty(), "unexpected argument '" << escaped(args->unmatched().front()) << "' (see "
                                                                   << options.program() << " --help)");
  return args;
}

std::vector<std::string> list_option(const cxxopts::ParseResult& args, const std::string& name) {
  return args.count(name) ? args[name].as<std::vector<std::string>>() : std::vector<std::string>{};
}

std::vector<std::string> checkpoint_overrides(const cxxopts::ParseResult& args,
                                              const std::vector<std::string>& allowed) {
  std::vector<std::string> overrides = list_option(args, "set");
  for (const std::string& s : overrides) {
    const std::string key = s.substr(0, s.find('='));
    bool ok = false;
    std::string names;
    for (const std::string& a : allowed) {
      ok = ok || (a.back() == '.' ? key.rfind(a, 0) == 0 && key.size() > a.size() : key == a);
      names += (names.empty() ? "" : ", ") + (a.back() == '.' ? a + "*" : a);
    }
    HEADLAB_CHECK(ok, "--set " << s << ": only " << names << " can change here (the model is the checkpoint's)");
  }
  return overrides;
}

void add_search_options(cxxopts::Options& options, int64_t default_beam) {
  options.add_options()("beam", "beam size; 1 = greedy decoding",
                        cxxopts::value<int64_t>()->default_value(std::to_string(default_beam)))(
      "lenpen", "length penalty of beam search (fairseq's): 0 = sum of log p, 1 = mean per token",
      cxxopts::value<double>()->default_value("1"));
}

SearchOptions search_options(const cxxopts::ParseResult& args) {
  SearchOptions search;
  search.beam = *count_option<int64_t>(args, "beam", 1);
  search.length_penalty = args["lenpen"].as<double>();
  HEADLAB_CHECK(std::isfinite(search.length_penalty), "--lenpen must be finite, got " << search.length_penalty);
  return search;
}

std::string escaped(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\\')
      out += "\\\\";
    else if (c < 32 || c == 127) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string counted(int64_t n, const std::string& noun, const std::string& plural) {
  return std::to_string(n) + " " + (n == 1 ? noun : plural.empty() ? noun + "s" : plural);
}

}  // namespace headlab::cli
