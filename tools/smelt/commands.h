// The subcommands of the smelt CLI: each is a function from its arguments to an exit status.
#pragma once

#include <string>
#include <vector>

namespace smelt::cli {

/// `smelt demo`: builds, evaluates and prints a few computations with their timings.
int run_demo(const std::vector<std::string>& args);

}  // namespace smelt::cli
