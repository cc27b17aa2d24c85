// The always-on assertion behind SMELT_ASSERT.
#include "smelt/errors.h"

namespace smelt {

void assertion_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw Error("internal error: " + msg + " (" + expr + " at " + file + ":" + std::to_string(line) + ")");
}

}  // namespace smelt
