// The origin table of transforms/origin.h: node id -> the unit (ONNX node, module) that made it.
#include "src/transforms/origin.h"

#include "smelt/errors.h"
#include "src/transforms/rules.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "src/core/node.h"

namespace smelt::transforms {

namespace {

struct OriginTable {
  std::mutex mutex;
  struct Entry {
    std::weak_ptr<detail::Node> node;
    std::string origin;
  };
  std::unordered_map<uint64_t, Entry> entries;
  size_t purge_at = 4096;
};

OriginTable& table() {
  static OriginTable* t = new OriginTable;  // never destroyed: nodes may go during exit
  return *t;
}

}  // namespace

uint64_t origin_mark() { return detail::next_node_id(); }

void set_origin(const std::vector<Array>& outputs, uint64_t mark, const std::string& origin) {
  std::vector<Array> work;
  for (const auto& a : outputs)
    if (a.valid()) work.push_back(a);
  std::vector<std::shared_ptr<detail::Node>> found;
  std::unordered_set<const detail::Node*> seen;
  {
    std::lock_guard lock(table().mutex);
    while (!work.empty()) {
      Array a = std::move(work.back());
      work.pop_back();
      const detail::Node& n = a.node();
      if (n.id < mark || n.evaluated || !seen.insert(&n).second) continue;
      if (table().entries.count(n.id)) continue;  // made by an earlier unit
      found.push_back(a.node_ptr());
      for (const auto& in : n.inputs) work.push_back(in);
    }
    auto& t = table();
    for (const auto& n : found) t.entries[n->id] = {n, origin};
    if (t.entries.size() >= t.purge_at) {
      std::erase_if(t.entries, [](const auto& kv) { return kv.second.node.expired(); });
      t.purge_at = std::max<size_t>(4096, t.entries.size() * 2);
    }
  }
}

std::string origin_of(const Array& a) {
  if (!a.valid()) return {};
  std::lock_guard lock(table().mutex);
  auto it = table().entries.find(a.node().id);
  return it == table().entries.end() ? std::string() : it->second.origin;
}

std::vector<Array> vjp_rule_naming_origin(const Array& a, const Array& g) {
  try {
    return vjp_rule(a, g);
  } catch (const UnsupportedError& e) {
    // A layer that built this node from its own units (an ONNX node) says which one it was.
    std::string origin = origin_of(a);
    if (origin.empty()) throw;
    std::string what = e.what();
    if (what.rfind("vjp: ", 0) == 0) what = what.substr(5);
    throw UnsupportedError("vjp: " + origin + ": " + what);
  }
}

}  // namespace smelt::transforms
