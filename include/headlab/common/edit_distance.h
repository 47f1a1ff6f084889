// Edit distance for "did you mean" suggestions (unknown config keys, unknown verbs).
//   edit_distance("n_head", "n_heads") == 1;  edit_distance("trian", "train") == 2
#pragma once

#include <cstddef>
#include <string>

namespace headlab {

// Insertions and deletions cost 1, a substitution 2 (a deletion plus an insertion), so a missing
// letter is nearer than a wrong one: "n_head" is nearer "n_heads" than "d_head".
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace headlab
