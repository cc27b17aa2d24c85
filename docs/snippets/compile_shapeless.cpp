// docs/compile.md, "Shapeless": one trace of layer_norm serves inputs of another batch size.
#include <smelt/compile.h>
#include <smelt/smelt.h>

int main() {
  smelt::Array ka = smelt::random::key(0), kb = smelt::random::key(1);
  smelt::Array a = smelt::random::normal(ka, {8, 512}), b = smelt::random::normal(kb, {3, 512});
  smelt::Array w = smelt::ones({512});
  // snippet-begin
  smelt::CompileOptions o;
  o.shapeless = true;
  auto norm = smelt::compile([](const smelt::Array& x, const smelt::Array& w) {
    return smelt::layer_norm(x, w, std::nullopt, 1e-5);
  }, o);
  norm(a /* [8, 512] */, w);  // traced
  norm(b /* [3, 512] */, w);  // replayed with the new shape
  // snippet-end
}
