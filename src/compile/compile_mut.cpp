// compile_mut's diagnostics: what changed between the state a step was given and the one it returned.
#include <string>

#include "smelt/compile.h"

namespace smelt::detail {

std::string describe_state_change(const FlatTree& before, const FlatTree& after) {
  if (before.leaves.size() != after.leaves.size())
    return std::to_string(before.leaves.size()) + " array leaves -> " + std::to_string(after.leaves.size());
  for (size_t i = 0; i < before.leaves.size(); ++i) {
    const Array& a = before.leaves[i];
    const Array& b = after.leaves[i];
    if (a.dtype() != b.dtype() || a.shape() != b.shape())
      return "leaf " + std::to_string(i) + ": " + dtype_name(a.dtype()) + shape_to_string(a.shape()) + " -> " +
             dtype_name(b.dtype()) + shape_to_string(b.shape());
  }
  return "static leaves or tree structure changed";
}

}  // namespace smelt::detail
