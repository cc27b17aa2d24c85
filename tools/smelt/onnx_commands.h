// The ONNX subcommands of the smelt CLI: `check` (conformance folders), `info` (model summary), `view` (HTML graph).
#pragma once

#include <string>
#include <vector>

namespace smelt::cli {

/// `smelt check DIR [--skip-list FILE] [--filter TEXT] [--verbose] [--no-fork]`: runs every case of
/// a folder in the ONNX backend-test format and prints one line per failing case, then
/// `N passed, N failed, N skipped`. Exits 0 when no case failed.
int run_check(const std::vector<std::string>& args);

/// `smelt info MODEL`: IR version, opsets, inputs, outputs, initializers, operators used, and
/// the operators smelt cannot run yet.
int run_info(const std::vector<std::string>& args);

/// `smelt view MODEL [-o FILE.html] [--compile ...]`: writes the offline HTML graph view (with
/// --compile colored by the compiled model's segments) and prints its path.
int run_view(const std::vector<std::string>& args);

}  // namespace smelt::cli
