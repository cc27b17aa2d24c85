// The subcommands of the smelt CLI: each is a function from its arguments to an exit status.
#pragma once

#include <string>
#include <vector>

#include "smelt/errors.h"

namespace smelt::cli {

/// `smelt demo`: builds, evaluates and prints a few computations with their timings.
int run_demo(const std::vector<std::string>& args);

/// `smelt run MODEL [--input NAME=FILE.npy | NAME=random[:D0xD1...]]... [--dim SYMBOL=N]...
/// [--output-dir DIR] [--repeat N] [--threads N] [--seed S] [--json FILE]`: runs an ONNX model
/// eagerly on the given inputs (random ones for the rest, shaped from the model's declarations),
/// prints each output's type and leading values and the run times, and can save the outputs.
int run_model(const std::vector<std::string>& args);

/// A malformed command line: main prints it and exits with status 2 (other errors exit with 1).
class UsageError : public InvalidArgument {
 public:
  using InvalidArgument::InvalidArgument;
};

}  // namespace smelt::cli
