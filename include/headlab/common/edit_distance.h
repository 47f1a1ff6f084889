// Edit distance for "did you mean" suggestions (unknown config keys, verbs, options and option
// values such as --strategy, --split and plot's --format).
//   edit_distance("n_head", "n_heads") == 1;  edit_distance("trian", "train") == 2
//   closest_name("trian", {"train", "eval"}) == "train";  closest_name("fly", {"train", "eval"}) == ""
//   throw Error(unknown_choice("split", "tset", {"val", "test"}));  // ...; did you mean 'test'?
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace headlab {

// Insertions and deletions cost 1, a substitution 2 (a deletion plus an insertion), so a missing
// letter is nearer than a wrong one: "n_head" is nearer "n_heads" than "d_head".
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest `name` (the first of equals), or "" when even it needs more edits than
// max(2, half of name's length): a typo gets a suggestion, an unrelated word does not.
std::string closest_name(const std::string& name, const std::vector<std::string>& candidates);

// The one line for a value that is none of `choices`, `what` naming its kind: with the nearest
// choice when closest_name finds one, "unknown strategy 'importnce'; did you mean 'importance'?",
// else with all of them, "unknown split 'dev' (expected val or test)".
std::string unknown_choice(const std::string& what, const std::string& name, const std::vector<std::string>& choices);

}  // namespace headlab
