// The option parsing every verb shares, so that they all answer --help and fail alike: one line
// naming the option, which main() prints before exiting with code 2.
//   cxxopts::Options options("headlab eval", "..."); options.add_options()(...);
//   const auto args = parse_options(options, {"checkpoint"}, argc, argv);
//   if (!args) return 0;  // --help was printed
//   const auto batches = count_option<int64_t>(*args, "batches", 1);  // nullopt when not given
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/common/error.h"
#include "headlab/decode/search.h"

namespace headlab::cli {

// Parses argv, filling `positional` (option names) in order. Prints the help and returns nullopt
// for -h/--help. Throws headlab::Error for an argument beyond the positional ones (which would
// otherwise be ignored) and for a value of the wrong type, naming the option (cxxopts names only
// the value).
std::optional<cxxopts::ParseResult> parse_options(cxxopts::Options& options, const std::vector<std::string>& positional,
                                                  int argc, char** argv);

// A numeric option's value (given, or its default; nullopt when it has neither), which must be at
// least `min`: counts are never negative, so `--batches -3` is an error rather than a silent
// "whole split".
template <typename T>
std::optional<T> count_option(const cxxopts::ParseResult& args, const std::string& name, T min) {
  const cxxopts::OptionValue& value = args[name];
  if (!value.count() && !value.has_default()) return std::nullopt;
  const T v = value.as<T>();
  HEADLAB_CHECK(v >= min, "--" << name << " must be at least " << min << ", got " << v);
  return v;
}

// The values of a repeatable string option (--set), empty when not given.
std::vector<std::string> list_option(const cxxopts::ParseResult& args, const std::string& name);

// The --set values of a verb that reads a checkpoint, each of whose key is one of `allowed` (a key,
// or a section prefix ending in '.': "data."); any other key, a model key above all, is one line
// naming it. The keys a verb allows are in its --set help.
std::vector<std::string> checkpoint_overrides(const cxxopts::ParseResult& args,
                                              const std::vector<std::string>& allowed);

// --beam N and --lenpen X, which translate and eval share: added to `options`, then read (a beam
// of 0, or a length penalty that is not finite, is one line naming the option).
void add_search_options(cxxopts::Options& options, int64_t default_beam = 1);
SearchOptions search_options(const cxxopts::ParseResult& args);

// "a\nb" -> "a\\nb": a value shown in help or messages on one line.
std::string escaped(const std::string& text);

// "1 head", "0 heads", "3 heads": a count and its noun, plural (noun + "s" unless given) unless
// the count is 1: counted(n, "batch", "batches").
std::string counted(int64_t n, const std::string& noun, const std::string& plural = "");

}  // namespace headlab::cli
