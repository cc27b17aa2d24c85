// An outside program using smelt through its public headers only: builds an array, compiles a
// function, checks the values; exits non-zero on a wrong value.
#include <smelt/compile.h>
#include <smelt/smelt.h>
#include <smelt/telemetry.h>
#include <smelt/tree.h>
#ifdef SMELT_ONNX  // defined by smelt::smelt (and smelt.pc) when smelt has its ONNX layer
#include <smelt/onnx.h>
#include <smelt/view.h>
#endif

#include <cstdio>
#include <vector>

static void print_values(const char* label, const std::vector<float>& v) {
  std::fprintf(stderr, " %s {", label);
  for (float e : v) std::fprintf(stderr, " %g", e);
  std::fprintf(stderr, " }");
}

int main() {
  using namespace smelt;
  // Force the CPU so the check is the same on a machine with a GPU.
  Array x = to_device(Array({0.0f, 1.0f, 2.0f, 3.0f}), Device::cpu());
  auto f = compile([](const Array& v) { return v * v * Array(0.5f) + Array(1.0f); });
  // Every value is exact in float32: 0.5 * v^2 + 1.
  const std::vector<float> expected = {1.0f, 1.5f, 3.0f, 5.5f};
  const std::vector<float> eager = (x * x * Array(0.5f) + Array(1.0f)).to_vector<float>();
  const std::vector<float> compiled = f(x).to_vector<float>();
  if (compiled != expected || eager != expected) {
    std::fprintf(stderr, "consumer: wrong values:");
    print_values("compiled", compiled);
    print_values("eager", eager);
    std::fprintf(stderr, "\n");
    return 1;
  }
  if (f.stats().traces != 1) {
    std::fprintf(stderr, "consumer: expected 1 trace, got %llu\n", static_cast<unsigned long long>(f.stats().traces));
    return 1;
  }
  std::printf("consumer: ok (compiled 0.5 * x^2 + 1 on [0, 1, 2, 3])\n");
  return 0;
}
