// The smelt command-line tool: `smelt demo` for now.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "smelt/smelt.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "demo") != 0) {
    std::fprintf(stderr, "usage: smelt demo\n");
    return 2;
  }
  smelt::Array a = smelt::arange(0.0, 6.0, 1.0);
  std::cout << smelt::reshape(a, {2, 3}) << "\n";
  return 0;
}
