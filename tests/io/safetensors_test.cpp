// Tests for .safetensors save/load: round trips of every dtype, a file laid out byte by byte as
// the Python safetensors package writes it, and every error on malformed (untrusted) files.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include <unistd.h>

#include "smelt/io.h"
#include "io/file_test_utils.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::bit_equal;
using test::random_array;

using test::kAllDtypes;
using test::read_file;
using test::write_file;

std::string temp_path(const std::string& name) { return test::temp_path("smelt_st_", name); }

std::string u64le(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return s;
}

// A file of a header (padded with spaces to 8 bytes, as the writers do) and raw data.
std::string st_file(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return u64le(header.size()) + header + data;
}

std::string f32_bytes(std::initializer_list<float> v) {
  std::string s;
  for (float x : v) s.append(reinterpret_cast<const char*>(&x), 4);
  return s;
}

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  std::map<std::string, Array> arrays;
  uint32_t seed = 1;
  for (Dtype d : kAllDtypes) {
    arrays[std::string("t_") + dtype_name(d)] = random_array({3, 5}, d, -50, 50, seed++);
  }
  arrays["scalar"] = Array(2.5);
  arrays["empty"] = zeros({0, 4}, float32);
  arrays["view"] = transpose(random_array({4, 3}, float32, -1, 1, 99));  // non-contiguous: written row-major
  const std::string path = temp_path("all.safetensors");
  save_safetensors(path, arrays, {{"format", "pt"}, {"note", "quote \" and\nnewline"}});
  auto back = load_safetensors(path);
  ASSERT_EQ(back.size(), arrays.size());
  for (auto& [name, a] : arrays) EXPECT_TRUE(bit_equal(back.at(name), copy(a))) << name;
  auto meta = safetensors_metadata(path);
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(meta.at("note"), "quote \" and\nnewline");
  // The data starts 8-byte aligned and the header is the compact JSON the format describes.
  const std::string bytes = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_NE(bytes.find("\"scalar\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":["), std::string::npos);
  std::remove(path.c_str());
}

// The layout Python's `safetensors.torch.save_file({"weight": ..., "ids": ...}, metadata=...)`
// writes: metadata first, tensors by dtype alignment then name, compact JSON, space padding.
TEST(Safetensors, ReadsAFileInThePythonPackagesLayout) {
  std::string header =
      "{\"__metadata__\":{\"format\":\"pt\"},\"weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
      "\"ids\":{\"dtype\":\"I16\",\"shape\":[3],\"data_offsets\":[16,22]},"
      "\"half\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[22,24]}}";
  std::string data = f32_bytes({1.0f, -2.0f, 0.5f, 3.25f});
  const int16_t ids[] = {7, -1, 300};
  data.append(reinterpret_cast<const char*>(ids), 6);
  data += std::string("\x80\x3f", 2);  // bfloat16 1.0 (0x3f80), little endian
  const std::string path = temp_path("python.safetensors");
  write_file(path, st_file(header, data));
  auto t = load_safetensors(path);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t.at("weight").shape(), (Shape{2, 2}));
  EXPECT_EQ(t.at("weight").to_vector<float>(), (std::vector<float>{1.0f, -2.0f, 0.5f, 3.25f}));
  EXPECT_EQ(t.at("ids").dtype(), int16);
  EXPECT_EQ(t.at("ids").to_vector<int>(), (std::vector<int>{7, -1, 300}));
  EXPECT_EQ(t.at("half").dtype(), bfloat16);
  EXPECT_EQ(t.at("half").item<float>(), 1.0f);
  EXPECT_EQ(safetensors_metadata(path).at("format"), "pt");
  std::remove(path.c_str());
}

TEST(Safetensors, ReadsEscapesAndAnEmptyHeader) {
  const std::string path = temp_path("esc.safetensors");
  write_file(path, st_file("{\"a\\u00e9\\n\\/\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", "\x05"));
  auto t = load_safetensors(path);
  ASSERT_EQ(t.count("a\xc3\xa9\n/"), 1u);
  EXPECT_EQ(t.at("a\xc3\xa9\n/").item<int>(), 5);
  write_file(path, st_file("{}", ""));
  EXPECT_TRUE(load_safetensors(path).empty());
  std::remove(path.c_str());
}

struct Malformed {
  const char* what;
  std::string bytes;
  const char* message;
};

TEST(Safetensors, MalformedFilesRaiseClearErrors) {
  const std::string ok_entry = "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
  const std::string data8 = f32_bytes({1, 2});
  const Malformed cases[] = {
      {"short", "abc", "fewer than the 8-byte header length"},
      {"huge length", u64le(1ull << 40) + "{}", "the header length 1099511627776 exceeds the file"},
      {"length past end", u64le(64) + "{}      ", "exceeds the file"},
      {"not json", st_file("[1,2]", ""), "malformed header: expected '{'"},
      {"truncated json", u64le(5) + "{\"a\":", "malformed header: it ends early"},
      {"bad dtype", st_file("{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[1],\"data_offsets\":[0,1]}}", "x"),
       "tensor 'a' has the dtype 'F8_E4M3', which smelt does not support"},
      {"missing field", st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", data8),
       "tensor 'a' needs dtype, shape and data_offsets"},
      {"unknown field", st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", data8),
       "tensor 'a' has the unknown field 'x'"},
      {"negative dim", st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", data8),
       "shape entries must be a non-negative integer"},
      {"float offset", st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8.0]}}", data8),
       "data_offsets must be an integer"},
      {"wrong size", st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", data8),
       "tensor 'a' (float32[3]) has data_offsets [0, 8], which do not hold its 3 elements"},
      {"past the data", st_file("{" + ok_entry + "}", "1234"), "tensor 'a' data_offsets [0, 8] run past the data (4 bytes)"},
      {"gap", st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", data8),
       "tensor 'a' starts at byte 4 of the data, expected 0 (a gap)"},
      {"overlap",
       st_file("{" + ok_entry + ",\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", data8),
       "(it overlaps another tensor)"},
      {"trailing data", st_file("{" + ok_entry + "}", data8 + "12345678"), "the tensors cover 8 of the 16 data bytes"},
      {"duplicate", st_file("{" + ok_entry + "," + ok_entry + "}", data8), "the key 'a' appears twice"},
      {"overflowing shape",
       st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", data8),
       "overflows"},
      {"metadata not strings", st_file("{\"__metadata__\":{\"k\":1}}", ""), "__metadata__ values must be strings ('k')"},
      {"bad escape", st_file("{\"a\\q\":1}", ""), "an unknown escape '\\q'"},
      {"lone surrogate", st_file("{\"\\ud800\":1}", ""), "an unpaired surrogate"},
      {"trailing text", u64le(8) + "{}  x   ", "unexpected text after the header object"},
      {"bool byte", st_file("{\"a\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]}}", std::string("\x01\x02", 2)),
       "tensor 'a' (BOOL) holds the byte 2 at element 1"},
  };
  const std::string path = temp_path("bad.safetensors");
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    write_file(path, c.bytes);
    try {
      load_safetensors(path);
      ADD_FAILURE() << "no error for " << c.what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("load_safetensors: " + path, 0), 0u) << e.what();
    }
  }
  std::remove(path.c_str());
  EXPECT_THROW_MSG(load_safetensors(temp_path("missing")), InvalidArgument, "cannot open");
}

TEST(Safetensors, SaveErrors) {
  EXPECT_THROW_MSG(save_safetensors(temp_path("x"), {{"__metadata__", Array(1.0f)}}), InvalidArgument,
                   "'__metadata__' cannot name a tensor");
  EXPECT_THROW_MSG(save_safetensors(temp_path("x"), {{"a", Array()}}), InvalidArgument, "tensor 'a' is an empty handle");
  EXPECT_THROW_MSG(save_safetensors("/nonexistent-dir/x.safetensors", {{"a", Array(1.0f)}}), InvalidArgument,
                   "cannot open for writing");
}

}  // namespace
}  // namespace smelt
