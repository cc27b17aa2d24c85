// ONNX string operators on the host: StringConcat, StringNormalizer, StringSplit, RegexFullMatch.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <re2/re2.h>

#include "src/onnx/ops/op_helpers.h"

namespace smelt::onnx {

namespace {

// How often the host loops over elements look at the run's deadline and cancellation.
constexpr size_t kCheckEvery = 256;

const StringTensor& strings_input(OpContext& c, size_t i) {
  const Value& v = c.input(i);
  if (!v.is_strings()) c.fail("input " + std::to_string(i) + " must be a string tensor, got " + v.describe());
  return v.string_tensor();
}

/// Positions of each operand's element for every element of the broadcast shape.
std::vector<int64_t> broadcast_positions(const Shape& from, const Shape& to) {
  int64_t n = element_count(from, "string broadcast");
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return broadcast_to(Array(v, from), to).to_vector<int64_t>();
}

std::vector<Value> op_string_concat(OpContext& c) {
  const auto& a = strings_input(c, 0);
  const auto& b = strings_input(c, 1);
  Shape out = broadcast_shapes(a.shape, b.shape);
  auto ia = broadcast_positions(a.shape, out), ib = broadcast_positions(b.shape, out);
  std::vector<std::string> data(ia.size());
  for (size_t i = 0; i < ia.size(); ++i) data[i] = a.data[static_cast<size_t>(ia[i])] + b.data[static_cast<size_t>(ib[i])];
  return {Value::strings(StringTensor{out, data})};
}

std::string to_case(std::string s, bool upper) {
  for (auto& ch : s) ch = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(ch)) : std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::vector<Value> op_string_normalizer(OpContext& c) {
  const auto& x = strings_input(c, 0);
  std::string action = c.attr_string("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    c.fail("case_change_action must be NONE, LOWER or UPPER, got \"" + action + "\"");
  bool sensitive = c.attr_int("is_case_sensitive", 0) != 0;
  std::set<std::string> stop;
  for (const auto& w : c.attr_strings("stopwords")) stop.insert(sensitive ? w : to_case(w, false));
  if (x.shape.size() > 2 || (x.shape.size() == 2 && x.shape[0] != 1))
    c.fail("input must be [C] or [1, C], got " + c.input(0).describe());
  std::vector<std::string> kept;
  for (const auto& s : x.data) {
    if (stop.count(sensitive ? s : to_case(s, false))) continue;
    kept.push_back(action == "NONE" ? s : to_case(s, action == "UPPER"));
  }
  // Everything filtered out leaves one empty string.
  if (kept.empty()) kept.push_back("");
  Shape shape = x.shape.size() == 2 ? Shape{1, static_cast<int64_t>(kept.size())} : Shape{static_cast<int64_t>(kept.size())};
  return {Value::strings(StringTensor{shape, kept})};
}

std::vector<Value> op_string_split(OpContext& c) {
  const auto& x = strings_input(c, 0);
  std::string delim = c.attr_string("delimiter", "");
  int64_t maxsplit = c.has_attr("maxsplit") ? c.attr_int("maxsplit", 0) : -1;
  std::vector<std::vector<std::string>> parts;
  size_t widest = 0;
  for (const auto& s : x.data) {
    if (parts.size() % kCheckEvery == 0) c.check_stop();
    std::vector<std::string> p;
    if (delim.empty()) {  // runs of whitespace separate; leading and trailing ones are dropped
      size_t i = 0;
      int64_t splits = 0;
      while (i < s.size()) {
        while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
        if (i >= s.size()) break;
        if (maxsplit >= 0 && splits == maxsplit) {
          std::string rest = s.substr(i);
          rest.erase(rest.find_last_not_of(" \t\n\r\f\v") + 1);
          p.push_back(rest);
          break;
        }
        size_t j = i;
        while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
        p.push_back(s.substr(i, j - i));
        ++splits;
        i = j;
      }
    } else {
      size_t start = 0;
      int64_t splits = 0;
      for (;;) {
        size_t at = s.find(delim, start);
        if (at == std::string::npos || (maxsplit >= 0 && splits == maxsplit)) {
          p.push_back(s.substr(start));
          break;
        }
        p.push_back(s.substr(start, at - start));
        start = at + delim.size();
        ++splits;
      }
    }
    widest = std::max(widest, p.size());
    parts.push_back(std::move(p));
  }
  Shape out = x.shape;
  out.push_back(static_cast<int64_t>(widest));
  std::vector<std::string> data;
  std::vector<int64_t> counts;
  for (auto& p : parts) {
    counts.push_back(static_cast<int64_t>(p.size()));
    p.resize(widest);
    data.insert(data.end(), p.begin(), p.end());
  }
  return {Value::strings(StringTensor{out, data}), tv(reshape(int64_array(counts), x.shape))};
}

std::vector<Value> op_regex_full_match(OpContext& c) {
  const auto& x = strings_input(c, 0);
  std::string pattern = c.attr_string("pattern", "");
  // RE2, the syntax the ONNX spec names: matching runs in time linear in the input, without
  // recursion, so neither `(a|b)*` on a long string nor `(a+)+$` on "aaaa...b" can exhaust the
  // stack or backtrack exponentially (std::regex did both).
  RE2::Options options;
  options.set_log_errors(false);
  RE2 re(pattern, options);
  if (!re.ok()) c.fail("invalid pattern \"" + pattern + "\": " + re.error());
  std::vector<uint8_t> out;
  out.reserve(x.data.size());
  for (size_t i = 0; i < x.data.size(); ++i) {
    if (i % kCheckEvery == 0) c.check_stop();
    out.push_back(RE2::FullMatch(x.data[i], re) ? 1 : 0);
  }
  return {tv(Array(out.empty() ? nullptr : out.data(), x.shape, bool_))};
}

/// TfIdfVectorizer: counts the pool's n-grams (with up to max_skip_count skipped items between
/// their elements) in each row, then TF counts, IDF weights, or their product.
std::vector<Value> op_tfidf_vectorizer(OpContext& c) {
  const Value& x = c.input(0);
  bool strings = x.is_strings();
  const Shape& shape = x.shape();
  if (shape.size() != 1 && shape.size() != 2) c.fail("input must be [N] or [B, N], got " + x.describe());
  int64_t rows = shape.size() == 2 ? shape[0] : 1, cols = shape.back();
  int64_t min_n = c.attr_int("min_gram_length", 1), max_n = c.attr_int("max_gram_length", 1);
  int64_t max_skip = c.attr_int("max_skip_count", 0);
  std::string mode = c.attr_string("mode", "TF");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") c.fail("mode must be TF, IDF or TFIDF, got \"" + mode + "\"");
  auto counts = c.attr_ints("ngram_counts"), indexes = c.attr_ints("ngram_indexes");
  auto weights = c.attr_floats("weights");
  // Items as strings either way, so one map serves int64 and string pools.
  std::vector<std::string> pool;
  if (strings) pool = c.attr_strings("pool_strings");
  else for (auto v : c.attr_ints("pool_int64s")) pool.push_back(std::to_string(v));
  // Checked before any loop runs (found by the fuzzer: max_gram_length 2^62 looped for ever, and
  // the counts and indexes were used as positions unchecked).
  if (min_n < 1 || max_n < min_n || max_skip < 0)
    c.fail("needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, got " + std::to_string(min_n) +
           ", " + std::to_string(max_n) + ", " + std::to_string(max_skip));
  for (size_t level = 0; level < counts.size(); ++level)
    if (counts[level] < 0 || counts[level] > static_cast<int64_t>(pool.size()) ||
        (level > 0 && counts[level] < counts[level - 1]))
      c.fail("ngram_counts must be non-decreasing positions in the pool (" + std::to_string(pool.size()) +
             " items), got " + std::to_string(counts[level]) + " at " + std::to_string(level));
  for (auto i : indexes)
    if (i < 0 || i >= (int64_t{1} << 24)) c.fail("ngram_indexes must be in [0, 2^24), got " + std::to_string(i));
  // No n-gram of the pool is longer than its levels, nor than a row.
  max_n = std::min<int64_t>({max_n, static_cast<int64_t>(counts.size()), cols});
  std::vector<std::string> items;
  if (strings) items = x.string_tensor().data;
  else for (auto v : x.array().to_vector<int64_t>()) items.push_back(std::to_string(v));
  std::map<std::vector<std::string>, int64_t> grams;
  size_t gram_no = 0;
  for (size_t level = 0; level < counts.size(); ++level) {
    size_t n = level + 1;
    size_t begin = static_cast<size_t>(counts[level]);
    size_t end = level + 1 < counts.size() ? static_cast<size_t>(counts[level + 1]) : pool.size();
    for (size_t at = begin; at + n <= end; at += n, ++gram_no) {
      if (gram_no >= indexes.size()) c.fail("ngram_indexes has fewer entries than the pool's n-grams");
      grams[std::vector<std::string>(pool.begin() + static_cast<long>(at), pool.begin() + static_cast<long>(at + n))] =
          indexes[gram_no];
    }
  }
  int64_t width = indexes.empty() ? 0 : *std::max_element(indexes.begin(), indexes.end()) + 1;
  if (width > 0 && rows > (int64_t{1} << 28) / width)
    c.fail("the output [" + std::to_string(rows) + ", " + std::to_string(width) + "] would hold more than 2^28 values");
  std::vector<double> out(static_cast<size_t>(rows * width), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    c.check_stop();
    const std::string* row = items.data() + r * cols;
    for (int64_t n = std::max<int64_t>(min_n, 1); n <= max_n; ++n) {
      // A unigram has no gaps: it is counted once, whatever the skip count.
      // Past a skip whose n-gram spans more than the row, none fits (and the products stay small).
      int64_t skips = n == 1 ? 0 : std::min(max_skip, cols);
      for (int64_t skip = 0; skip <= skips && (n - 1) * (skip + 1) < cols; ++skip)
        for (int64_t i = 0; i + (n - 1) * (skip + 1) < cols; ++i) {
          std::vector<std::string> g;
          for (int64_t j = 0; j < n; ++j) g.push_back(row[i + j * (skip + 1)]);
          auto it = grams.find(g);
          if (it != grams.end()) out[static_cast<size_t>(r * width + it->second)] += 1;
        }
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j) {
      double& v = out[static_cast<size_t>(r * width + j)];
      double w = static_cast<size_t>(j) < weights.size() ? weights[static_cast<size_t>(j)] : 1.0;
      if (mode == "IDF") v = v > 0 ? w : 0;
      else if (mode == "TFIDF") v *= w;
    }
  Shape out_shape = shape.size() == 2 ? Shape{rows, width} : Shape{width};
  return {tv(astype(Array(out, out_shape), float32))};
}
}  // namespace

void register_string_ops(OpRegistry& r) {
  r.add("", "StringConcat", 20, op_string_concat);
  r.add("", "StringNormalizer", 10, op_string_normalizer);
  r.add("", "StringSplit", 20, op_string_split);
  r.add("", "RegexFullMatch", 20, op_regex_full_match);
  r.add("", "TfIdfVectorizer", 9, op_tfidf_vectorizer);
}

}  // namespace smelt::onnx
