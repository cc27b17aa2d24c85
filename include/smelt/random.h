// Counter-based random numbers: explicit keys, the same values on every device and thread count.
#pragma once

#include <optional>
#include <utility>

#include "smelt/array.h"

namespace smelt::random {

/// A key (uint32 [2]) from a seed, on the default device (device.h): draws from it run there.
Array key(uint64_t seed);
/// `num` independent keys from one, shape [num, 2].
Array split(const Array& key, int num);
/// Two independent keys, the rows of split(key, 2): `auto [k1, k2] = random::split(key);`.
std::pair<Array, Array> split(const Array& key);
/// Raw uint32 bits of `shape` (Threefry-2x32 of the key and the element's index).
Array bits(const Array& key, const Shape& shape);
/// Uniform in [low, high) (finite, low < high; float dtypes). float32/float64 give the values of
/// jax.random.uniform (threefry, non-partitionable), kept below high; halves round from float32.
Array uniform(const Array& key, const Shape& shape, double low = 0.0, double high = 1.0,
              Dtype dtype = float32);
/// Normal with the given mean and standard deviation.
Array normal(const Array& key, const Shape& shape, double mean = 0.0, double stddev = 1.0,
             Dtype dtype = float32);
/// True with probability p (p broadcasts against shape).
Array bernoulli(const Array& key, const Array& p, const Shape& shape);
/// Samples class indices from unnormalized log-probabilities along `axis` (int32).
Array categorical(const Array& key, const Array& logits, int axis = -1,
                  std::optional<Shape> shape = std::nullopt);
/// Integers in [low, high) (low < high, both within the integer dtype's range).
Array randint(const Array& key, int64_t low, int64_t high, const Shape& shape, Dtype dtype = int32);

// The thread's key sequence, for code that draws without passing keys around (nn::Dropout).
// Each thread holds a key, made from seed 0 on the default device at first use. next_key splits
// it, keeps one half and returns the other, so successive draws differ. compile_mut threads the
// key through a compiled step as an input and an output, so a compiled step advances the
// sequence exactly as the uncompiled step does.

/// Restarts this thread's sequence from key(seed).
void seed(uint64_t seed);
/// A fresh key from this thread's sequence (which advances).
Array next_key();
/// This thread's current key (uint32[2]), and replacing it: compile_mut saves it before a step
/// and sets the step's result (or restores it when the step fails).
Array thread_key();
/// Raises InvalidArgument unless `key` is a uint32[2] array.
void set_thread_key(const Array& key);

}  // namespace smelt::random
