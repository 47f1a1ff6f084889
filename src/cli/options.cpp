#include "options.h"

#include <cstdio>

namespace headlab::cli {

namespace {

// The option (as typed, "--tokens" or "-j") and value cxxopts could not parse, found by parsing
// each option alone: cxxopts's exception names only the value, which may appear more than once.
std::optional<std::pair<std::string, std::string>> bad_value(cxxopts::Options& options, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    const size_t eq = arg.find('=');
    std::vector<const char*> alone = {argv[0], argv[i]};
    if (eq == std::string::npos && i + 1 < argc) alone.push_back(argv[i + 1]);
    try {
      options.parse(static_cast<int>(alone.size()), alone.data());
    } catch (const cxxopts::exceptions::incorrect_argument_type&) {
      return std::pair{arg.substr(0, eq), eq == std::string::npos ? std::string(alone.back()) : arg.substr(eq + 1)};
    } catch (const cxxopts::exceptions::exception&) {
      // another problem of this argument (or a negative number read as an option): not this one
    }
  }
  return std::nullopt;
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

std::string escaped(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\\') out += "\\\\";
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

}  // namespace headlab::cli
