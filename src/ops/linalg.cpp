// Linear algebra ops: matmul with NumPy semantics (vector promotion, batch broadcasting).
#include "src/ops/op_utils.h"

namespace smelt {

Array matmul(const Array& a, const Array& b) {
  check_valid(a, "matmul");
  check_valid(b, "matmul");
  Device device = common_device({a, b}, "matmul");
  if (a.ndim() == 0 || b.ndim() == 0)
    throw InvalidArgument("matmul: 0-d operand in " + describe(a) + " @ " + describe(b) +
                          " (matmul needs at least 1 dimension; use multiply for scalars)");
  // A 1-d left operand is a row vector, a 1-d right operand a column vector; both axes are
  // dropped from the result again.
  Shape sa = a.shape(), sb = b.shape();
  const bool row = sa.size() == 1, col = sb.size() == 1;
  if (row) sa.insert(sa.begin(), 1);
  if (col) sb.push_back(1);
  const int64_t m = sa[sa.size() - 2], k = sa.back(), k2 = sb[sb.size() - 2], n = sb.back();
  if (k != k2)
    throw ShapeError("matmul: inner dimensions differ: " + describe(a) + " @ " + describe(b) + " (" +
                     std::to_string(k) + " != " + std::to_string(k2) + ")");
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  Shape batch;
  try {
    batch = broadcast_shapes(ba, bb, "matmul");
  } catch (const ShapeError&) {
    throw ShapeError("matmul: batch dimensions cannot be broadcast: " + describe(a) + " @ " + describe(b) + " (" +
                     shape_to_string(ba) + " vs " + shape_to_string(bb) + ")");
  }
  Dtype dtype = promote_types(a.dtype(), b.dtype());
  Shape full_a = batch, full_b = batch, out = batch;
  full_a.insert(full_a.end(), {m, k});
  full_b.insert(full_b.end(), {k, n});
  out.insert(out.end(), {m, n});
  Array x = broadcast_to(reshape(to_device(astype(a, dtype), device), sa), full_a);
  Array y = broadcast_to(reshape(to_device(astype(b, dtype), device), sb), full_b);
  Array r = make_array(out, dtype, device, make_prim(PrimKind::Matmul, MatmulParams{}), {x, y});
  if (!row && !col) return r;
  Shape final_shape = batch;
  if (!row) final_shape.push_back(m);
  if (!col) final_shape.push_back(n);
  return reshape(r, final_shape);
}

}  // namespace smelt
