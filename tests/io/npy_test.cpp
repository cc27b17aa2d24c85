// Tests for .npy save/load: round trips of every dtype, NumPy's exact header bytes, hand-built
// Fortran-order, big-endian and version 2.0/3.0 files, and every error on malformed files.
#include <cstdio>
#include <fstream>
#include <iterator>

#include <unistd.h>

#include "io/file_test_utils.h"
#include "test_utils.h"

namespace smelt {
namespace {

using test::bit_equal;
using test::random_array;

using test::kAllDtypes;
using test::read_file;
using test::write_file;

std::string temp_path(const std::string& name) { return test::temp_path("smelt_npy_", name); }

// A .npy file around a header dict and raw data, padded as NumPy pads (64-byte alignment).
std::string npy_file(const std::string& dict, const std::string& data, int major = 1) {
  size_t len_bytes = major == 1 ? 2 : 4;
  size_t hlen = dict.size() + 1;
  size_t pad = 64 - (6 + 2 + len_bytes + hlen) % 64;
  size_t total = hlen + pad;
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < len_bytes; ++i) out += static_cast<char>((total >> (8 * i)) & 0xff);
  return out + dict + std::string(pad, ' ') + "\n" + data;
}

template <class T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <class T>
std::string raw_big_endian(const std::vector<T>& v) {
  std::string s = raw(v);
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t a = 0, b = sizeof(T) - 1; a < b; ++a, --b) std::swap(s[i * sizeof(T) + a], s[i * sizeof(T) + b]);
  return s;
}

Array save_load(const Array& a, const std::string& name) {
  std::string p = temp_path(name);
  save(p, a);
  Array b = load(p);
  std::remove(p.c_str());
  return b;
}

// ---- round trips ----------------------------------------------------------------------------

TEST(Npy, RoundTripEveryDtype) {
  for (Dtype d : kAllDtypes) {
    SCOPED_TRACE(dtype_name(d));
    Array a = random_array({3, 4, 5}, d, -100.0, 100.0, static_cast<uint32_t>(d) + 1);
    Array b = save_load(a, "rt.npy");
    EXPECT_TRUE(b.is_contiguous());
    EXPECT_TRUE(bit_equal(b, a));
  }
}

TEST(Npy, RoundTripSpecialFloatsBitExact) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Array f32(std::vector<float>{nan, inf, -inf, -0.0f, 1e-45f, 3.4e38f}, {6});
  for (Dtype d : {float16, bfloat16, float32, float64}) {
    SCOPED_TRACE(dtype_name(d));
    Array a = astype(f32, d);
    EXPECT_TRUE(bit_equal(save_load(a, "special.npy"), a));
  }
  // Arbitrary half bit patterns (including NaN payloads) survive unchanged.
  std::vector<uint16_t> bits;
  for (uint32_t b = 0; b < 65536; b += 37) bits.push_back(static_cast<uint16_t>(b));
  Array h(bits.data(), {static_cast<int64_t>(bits.size())}, float16);
  EXPECT_TRUE(bit_equal(save_load(h, "halfbits.npy"), h));
}

TEST(Npy, RoundTripScalarsAndEmpty) {
  for (Dtype d : kAllDtypes) {
    SCOPED_TRACE(dtype_name(d));
    Array s = astype(Array(7.0), d);
    Array b = save_load(s, "scalar.npy");
    EXPECT_EQ(b.ndim(), 0);
    EXPECT_TRUE(bit_equal(b, s));
    for (const Shape& shape : {Shape{0}, Shape{0, 3}, Shape{3, 0, 2}}) {
      Array e = zeros(shape, d);
      Array eb = save_load(e, "empty.npy");
      EXPECT_EQ(eb.shape(), shape);
      EXPECT_EQ(eb.dtype(), d);
    }
  }
}

TEST(Npy, NonContiguousArraysSaveTheirValues) {
  Array a = random_array({4, 6}, float32, -5, 5, 3);
  Array t = transpose(a);
  EXPECT_TRUE(bit_equal(save_load(t, "t.npy"), copy(t)));
  Array s = slice(a, {3, 5}, {0, 0}, {-1, -2});  // negative steps
  EXPECT_EQ(s.shape(), (Shape{3, 3}));
  EXPECT_TRUE(bit_equal(save_load(s, "s.npy"), copy(s)));
  Array br = broadcast_to(reshape(arange(0.0, 3.0, 1.0), {3, 1}), {3, 5});  // zero strides
  Array bb = save_load(br, "b.npy");
  EXPECT_EQ(bb.to_vector<float>(), (std::vector<float>{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2}));
  Array lazy = reshape(transpose(a), {2, 12});  // unevaluated input
  EXPECT_TRUE(bit_equal(save_load(lazy, "lazy.npy"), copy(lazy)));
}

TEST(Npy, BoolBytesAreNormalized) {
  std::string p = temp_path("bool2.npy");
  write_file(p, npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", std::string("\x00\x01\x02\xff", 4)));
  Array b = load(p);
  EXPECT_EQ(b.dtype(), bool_);
  EXPECT_EQ(test::raw_bytes(b), (std::vector<uint8_t>{0, 1, 1, 1}));
  std::remove(p.c_str());
}

// ---- header bytes as NumPy writes them ------------------------------------------------------

std::string header_of(const Array& a) {
  std::string p = temp_path("hdr.npy");
  save(p, a);
  std::string bytes = read_file(p);
  std::remove(p.c_str());
  size_t nl = bytes.find('\n');
  return bytes.substr(0, nl + 1);
}

TEST(Npy, HeaderBytesMatchNumPy) {
  // Expected bytes from NumPy 2.4's np.save (the padding includes NumPy's 21-digit growth room).
  const std::string v1("\x93NUMPY\x01\x00", 8);
  EXPECT_EQ(header_of(zeros({2, 3}, float32)),
            v1 + "v" + std::string(1, '\0') + "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
                std::string(58, ' ') + "\n");
  EXPECT_EQ(header_of(zeros({5}, int64)),
            v1 + "v" + std::string(1, '\0') + "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }" +
                std::string(60, ' ') + "\n");
  EXPECT_EQ(header_of(Array(1.0)),
            v1 + "v" + std::string(1, '\0') + "{'descr': '<f8', 'fortran_order': False, 'shape': (), }" +
                std::string(62, ' ') + "\n");
  EXPECT_EQ(header_of(zeros({0, 3}, bool_)),
            v1 + "v" + std::string(1, '\0') + "{'descr': '|b1', 'fortran_order': False, 'shape': (0, 3), }" +
                std::string(58, ' ') + "\n");
  EXPECT_EQ(header_of(zeros({3, 2}, float16)),
            v1 + "v" + std::string(1, '\0') + "{'descr': '<f2', 'fortran_order': False, 'shape': (3, 2), }" +
                std::string(58, ' ') + "\n");
  // The growth room pushes this header from 128 to 192 bytes.
  Shape s(18, 1);
  s.push_back(3);
  EXPECT_EQ(header_of(zeros(s, uint16)),
            v1 + "\xb6" + std::string(1, '\0') +
                "{'descr': '<u2', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
                "1, 1, 1, 1, 1, 3), }" +
                std::string(71, ' ') + "\n");
  for (Dtype d : kAllDtypes) EXPECT_EQ(header_of(zeros({2}, d)).size() % 64, 0u) << dtype_name(d);
}

TEST(Npy, HeaderDescrs) {
  const std::pair<Dtype, const char*> expected[] = {
      {bool_, "'|b1'"}, {int8, "'|i1'"},   {int16, "'<i2'"},   {int32, "'<i4'"},   {int64, "'<i8'"},
      {uint8, "'|u1'"}, {uint16, "'<u2'"}, {uint32, "'<u4'"},  {uint64, "'<u8'"},  {float16, "'<f2'"},
      {float32, "'<f4'"}, {float64, "'<f8'"}};
  for (auto [d, descr] : expected)
    EXPECT_NE(header_of(zeros({2}, d)).find(std::string("'descr': ") + descr), std::string::npos) << dtype_name(d);
  EXPECT_NE(header_of(zeros({2}, bfloat16))
                .find("{'descr': '<V2', 'fortran_order': False, 'shape': (2,), 'smelt_dtype': 'bfloat16', }"),
            std::string::npos);
}

TEST(Npy, VeryLongHeaderUsesVersion2) {
  Shape s(25000, 1);  // a header over 64 KiB
  Array a = reshape(Array(std::vector<int32_t>{42}, {1}), s);
  std::string p = temp_path("v2.npy");
  save(p, a);
  std::string bytes = read_file(p);
  ASSERT_GT(bytes.size(), 12u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x02\x00", 8));
  size_t hlen = static_cast<uint8_t>(bytes[8]) | static_cast<uint8_t>(bytes[9]) << 8 |
                static_cast<uint8_t>(bytes[10]) << 16 | static_cast<size_t>(static_cast<uint8_t>(bytes[11])) << 24;
  EXPECT_EQ((12 + hlen) % 64, 0u);
  EXPECT_EQ(bytes.size(), 12 + hlen + 4);
  Array b = load(p);
  EXPECT_EQ(b.shape(), s);
  EXPECT_EQ(b.item<int32_t>(), 42);
  std::remove(p.c_str());
}

// ---- hand-built files -----------------------------------------------------------------------

TEST(Npy, LoadsVersions2And3) {
  std::vector<float> v{1.5f, -2.0f, 3.25f, 4.0f};
  for (int major : {1, 2, 3}) {
    SCOPED_TRACE(major);
    std::string p = temp_path("ver.npy");
    write_file(p, npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", raw(v), major));
    Array a = load(p);
    EXPECT_EQ(a.shape(), (Shape{2, 2}));
    EXPECT_EQ(a.to_vector<float>(), v);
    std::remove(p.c_str());
  }
}

TEST(Npy, LoadsFortranOrder) {
  // A 2x3 matrix [[0,1,2],[3,4,5]] stored column by column.
  std::string p = temp_path("f.npy");
  write_file(p, npy_file("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                         raw(std::vector<int32_t>{0, 3, 1, 4, 2, 5})));
  Array a = load(p);
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_TRUE(a.is_contiguous());
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  // 3-d: element (i, j, k) sits at i + 2j + 6k in the file.
  std::vector<double> col(2 * 3 * 4), row(2 * 3 * 4);
  auto vals = test::random_values(col.size(), -1, 1, 9);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        col[i + 2 * j + 6 * k] = vals[i * 12 + j * 4 + k];
        row[i * 12 + j * 4 + k] = vals[i * 12 + j * 4 + k];
      }
  write_file(p, npy_file("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3, 4), }", raw(col)));
  EXPECT_EQ(load(p).to_vector<double>(), row);
  // Fortran order of a 1-d, 0-d and empty array is the same as C order.
  write_file(p, npy_file("{'descr': '<i2', 'fortran_order': True, 'shape': (3,), }", raw(std::vector<int16_t>{7, 8, 9})));
  EXPECT_EQ(load(p).to_vector<int16_t>(), (std::vector<int16_t>{7, 8, 9}));
  write_file(p, npy_file("{'descr': '<i2', 'fortran_order': True, 'shape': (), }", raw(std::vector<int16_t>{-4})));
  EXPECT_EQ(load(p).item<int16_t>(), -4);
  write_file(p, npy_file("{'descr': '<i2', 'fortran_order': True, 'shape': (0, 5), }", ""));
  EXPECT_EQ(load(p).shape(), (Shape{0, 5}));
  std::remove(p.c_str());
}

TEST(Npy, LoadsBigEndian) {
  std::string p = temp_path("be.npy");
  std::vector<float> f{1.0f, -2.5f, 3e38f, 1e-40f};
  write_file(p, npy_file("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", raw_big_endian(f)));
  EXPECT_EQ(load(p).to_vector<float>(), f);
  std::vector<int16_t> i16{1, -2, 300, -32768};
  write_file(p, npy_file("{'descr': '>i2', 'fortran_order': False, 'shape': (2, 2), }", raw_big_endian(i16)));
  EXPECT_EQ(load(p).to_vector<int16_t>(), i16);
  std::vector<uint64_t> u64{1, 0x0102030405060708ull, ~0ull};
  write_file(p, npy_file("{'descr': '>u8', 'fortran_order': False, 'shape': (3,), }", raw_big_endian(u64)));
  EXPECT_EQ(load(p).to_vector<uint64_t>(), u64);
  std::vector<double> f64{3.14159, -1e300};
  write_file(p, npy_file("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", raw_big_endian(f64)));
  EXPECT_EQ(load(p).to_vector<double>(), f64);
  std::vector<uint16_t> h{0x3c00, 0xc000, 0x7c00};  // 1, -2, inf
  write_file(p, npy_file("{'descr': '>f2', 'fortran_order': False, 'shape': (3,), }", raw_big_endian(h)));
  Array hf = load(p);
  EXPECT_EQ(hf.dtype(), float16);
  EXPECT_EQ(hf.to_vector<float>(), (std::vector<float>{1.0f, -2.0f, std::numeric_limits<float>::infinity()}));
  // Big endian and Fortran order together.
  std::vector<int32_t> col{0, 3, 1, 4, 2, 5};
  write_file(p, npy_file("{'descr': '>i4', 'fortran_order': True, 'shape': (2, 3), }", raw_big_endian(col)));
  EXPECT_EQ(load(p).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  // One-byte types ignore the byte order; '=' is native (little endian here).
  write_file(p, npy_file("{'descr': '>i1', 'fortran_order': False, 'shape': (2,), }", std::string("\x01\xff", 2)));
  EXPECT_EQ(load(p).to_vector<int8_t>(), (std::vector<int8_t>{1, -1}));
  write_file(p, npy_file("{'descr': '=u2', 'fortran_order': False, 'shape': (2,), }", raw(std::vector<uint16_t>{5, 60000})));
  EXPECT_EQ(load(p).to_vector<uint16_t>(), (std::vector<uint16_t>{5, 60000}));
  std::remove(p.c_str());
}

TEST(Npy, LoadsBfloat16AndLenientSpellings) {
  std::string p = temp_path("bf.npy");
  std::vector<uint16_t> bits{0x3f80, 0xc020, 0x7f80};  // 1, -2.5, inf
  write_file(p, npy_file("{'descr': '<V2', 'fortran_order': False, 'shape': (3,), 'smelt_dtype': 'bfloat16', }", raw(bits)));
  Array b = load(p);
  EXPECT_EQ(b.dtype(), bfloat16);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1.0f, -2.5f, std::numeric_limits<float>::infinity()}));
  // Double quotes, key order, no trailing comma, Python 2 longs and a list for the shape.
  write_file(p, npy_file("{\"shape\": [2L, 1L], \"fortran_order\": False, \"descr\": \"<i4\"}", raw(std::vector<int32_t>{4, 5})));
  Array c = load(p);
  EXPECT_EQ(c.shape(), (Shape{2, 1}));
  EXPECT_EQ(c.to_vector<int32_t>(), (std::vector<int32_t>{4, 5}));
  std::remove(p.c_str());
}

// ---- errors ---------------------------------------------------------------------------------

class NpyErrors : public ::testing::Test {
 protected:
  void TearDown() override { std::remove(path.c_str()); }
  // Writes `bytes` and expects load to throw `E` with "load: <path>: " + `what`.
  template <class E>
  void expect_error(const std::string& bytes, const std::string& what) {
    write_file(path, bytes);
    EXPECT_THROW_MSG(load(path), E, "load: " + path + ": " + what);
  }
  std::string path = temp_path("bad.npy");
};

TEST_F(NpyErrors, MissingFileAndDirectory) {
  std::string missing = temp_path("does_not_exist.npy");
  EXPECT_THROW_MSG(load(missing), InvalidArgument, "load: " + missing + ": cannot open (No such file or directory)");
  std::string dir = ::testing::TempDir();
  EXPECT_THROW_MSG(load(dir), InvalidArgument, "is a directory");
}

TEST_F(NpyErrors, BadMagicAndTruncatedPreamble) {
  expect_error<InvalidArgument>("", "not a .npy file (bad magic");
  expect_error<InvalidArgument>("PK\x03\x04 this is a zip", "not a .npy file (bad magic");
  expect_error<InvalidArgument>(std::string("\x93NUMPY", 6), "truncated header (the file ends inside the version)");
  expect_error<InvalidArgument>(std::string("\x93NUMPY\x01\x00\x10", 9), "truncated header (the file ends inside the header length)");
  expect_error<InvalidArgument>(std::string("\x93NUMPY\x02\x00\x10\x00", 10), "truncated header (the file ends inside the header length)");
}

TEST_F(NpyErrors, UnsupportedVersion) {
  std::string f = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", raw(std::vector<float>{1}));
  f[6] = 4;
  expect_error<UnsupportedError>(f, "unsupported .npy format version 4.0");
  f[6] = 1;
  f[7] = 1;
  expect_error<UnsupportedError>(f, "unsupported .npy format version 1.1");
}

TEST_F(NpyErrors, TruncatedHeader) {
  std::string f = npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "");
  expect_error<InvalidArgument>(f.substr(0, 40), "truncated header: it claims 118 bytes but the file has 40 bytes in all");
  // A version 2.0 length of 4 GiB in a small file.
  std::string huge("\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14);
  expect_error<InvalidArgument>(huge, "truncated header: it claims 4294967295 bytes");
}

TEST_F(NpyErrors, OverlongHeader) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }" + std::string(2 << 20, ' ');
  expect_error<InvalidArgument>(npy_file(dict, raw(std::vector<float>{1}), 2),
                                "the header claims 2097268 bytes (at most 1048576 are accepted)");
}

TEST_F(NpyErrors, MalformedHeader) {
  expect_error<InvalidArgument>(npy_file("descr: f4", ""), "malformed header: the header is not a Python dict");
  expect_error<InvalidArgument>(npy_file("{'descr' '<f4'}", ""), "malformed header: expected ':' after key 'descr'");
  expect_error<InvalidArgument>(npy_file("{'descr': '<f4", ""), "malformed header: unterminated string");
  expect_error<InvalidArgument>(npy_file("{'descr': '<f4' 'shape': (1,)}", ""), "malformed header: expected ',' or '}'");
  expect_error<InvalidArgument>(npy_file("{'fortran_order': 0}", ""), "malformed header: expected True or False");
  expect_error<InvalidArgument>(npy_file("{'shape': 3}", ""), "malformed header: expected a tuple for the shape");
  expect_error<InvalidArgument>(npy_file("{'shape': (3; 4)}", ""), "malformed header: expected ',' or ')' in the shape");
  expect_error<InvalidArgument>(npy_file("{'shape': (x,)}", ""), "malformed header: expected an integer in the shape");
  expect_error<InvalidArgument>(npy_file("{'shape': (99999999999999999999,)}", ""),
                                "malformed header: a dimension does not fit in 64 bits");
  expect_error<InvalidArgument>(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", ""),
                                "malformed header: unexpected text after the header dict");
  expect_error<InvalidArgument>(npy_file("{'descr': 'a\\'b'}", ""), "malformed header: escapes in strings are not supported");
  expect_error<InvalidArgument>(npy_file("{1: 2}", ""), "malformed header: expected a string for a dict key");
}

TEST_F(NpyErrors, MissingAndUnexpectedKeys) {
  expect_error<InvalidArgument>(npy_file("{'fortran_order': False, 'shape': (1,), }", ""), "the header has no 'descr'");
  expect_error<InvalidArgument>(npy_file("{'descr': '<f4', 'shape': (1,), }", ""), "the header has no 'fortran_order'");
  expect_error<InvalidArgument>(npy_file("{'descr': '<f4', 'fortran_order': False, }", ""), "the header has no 'shape'");
  expect_error<InvalidArgument>(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1, }", ""),
                                "unexpected key 'x' in the header");
  expect_error<UnsupportedError>(
      npy_file("{'descr': '<V2', 'fortran_order': False, 'shape': (1,), 'smelt_dtype': 'float8', }", "ab"),
      "unknown smelt_dtype 'float8'");
}

TEST_F(NpyErrors, UnknownDescr) {
  for (const char* descr : {"<c8", "<c16", "|O", "<U5", "|S3", "<M8[ns]", "<f16", "<i3", "x", "<V2", "|V8", "?"}) {
    SCOPED_TRACE(descr);
    expect_error<UnsupportedError>(
        npy_file(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (1,), }", "12345678"),
        std::string("unsupported dtype descr '") + descr + "'");
  }
  expect_error<UnsupportedError>(npy_file("{'descr': '<V2', 'fortran_order': False, 'shape': (1,), }", "ab"),
                                 "unsupported dtype descr '<V2' (raw void data; smelt reads '<V2' as bfloat16 only "
                                 "with 'smelt_dtype': 'bfloat16')");
  expect_error<UnsupportedError>(
      npy_file("{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (1,), }", "12345678"),
      "structured dtypes (a descr list) are not supported");
}

TEST_F(NpyErrors, NegativeShape) {
  expect_error<InvalidArgument>(npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", ""),
                                "negative dimension in shape [2,-3]");
}

TEST_F(NpyErrors, HugeShapesFailCleanly) {
  // Never allocated: the claimed size is compared with the file first.
  expect_error<InvalidArgument>(
      npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", "1234"),
      "truncated data: shape [1099511627776] of float32 needs 4398046511104 bytes but the file holds 4 after the header");
  expect_error<InvalidArgument>(
      npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", "1234"),
      "truncated data: shape [4294967296,4294967296,16] of float64 needs more than 2^64 bytes");
  expect_error<InvalidArgument>(
      npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (9223372036854775807, 9223372036854775807), }", ""),
      "truncated data: shape [9223372036854775807,9223372036854775807] of float64 needs more than 2^64 bytes");
  // A zero dimension makes the rest irrelevant.
  write_file(path, npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (9223372036854775807, 0), }", ""));
  EXPECT_EQ(load(path).shape(), (Shape{9223372036854775807, 0}));
}

TEST_F(NpyErrors, DataSizeMismatch) {
  std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
  expect_error<InvalidArgument>(npy_file(dict, std::string(20, 'x')),
                                "truncated data: shape [2,3] of int32 needs 24 bytes but the file holds 20");
  expect_error<InvalidArgument>(npy_file(dict, std::string(28, 'x')),
                                "data size mismatch: shape [2,3] of int32 needs 24 bytes but the file holds 28");
  expect_error<InvalidArgument>(npy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (), }", ""),
                                "truncated data: shape [] of int32 needs 4 bytes but the file holds 0");
}

TEST_F(NpyErrors, GarbageNeverCrashes) {
  // Random truncations and byte flips of a valid file: load either succeeds or throws a
  // smelt::Error, and a result it returns always matches the file size.
  std::string good = npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 5), }",
                              raw(std::vector<float>(15, 1.25f)));
  std::mt19937 rng(123);
  int loaded = 0, refused = 0;
  for (int iter = 0; iter < 400; ++iter) {  // file writes dominate the time
    std::string bytes = good;
    if (iter % 3 == 0) {
      bytes.resize(rng() % (good.size() + 1));
    } else {
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        size_t at = rng() % 128;  // mostly the preamble and the header
        const char pool[] = "\x00\x01\xff(),:'\" -0123456789TrueFalse<>|=fiubV{}[]Lx\n ";
        bytes[at] = pool[rng() % (sizeof(pool) - 1)];
      }
    }
    write_file(path, bytes);
    try {
      Array a = load(path);
      EXPECT_LE(a.nbytes(), bytes.size());
      a.eval();
      ++loaded;
    } catch (const Error&) {
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a smelt::Error: " << e.what();
    }
  }
  EXPECT_GT(loaded, 0);
  EXPECT_GT(refused, 0);
}

TEST(NpySave, Errors) {
  std::string p = temp_path("no_such_dir/x.npy");
  EXPECT_THROW_MSG(save(p, Array(1.0f)), InvalidArgument, "save: " + p + ": cannot open for writing (No such file or directory)");
  EXPECT_THROW_MSG(save(temp_path("empty.npy"), Array()), InvalidArgument, "save: ");
  EXPECT_THROW_MSG(save(temp_path("empty.npy"), Array()), InvalidArgument, "the array is an empty handle");
  if (std::ifstream("/dev/full").good())
    EXPECT_THROW_MSG(save("/dev/full", zeros({1 << 16}, float32)), InvalidArgument, "save: /dev/full: write failed");
}

}  // namespace
}  // namespace smelt
