// When loaded GPU kernels may go: the in-memory LRU of modules and the queue of unloads waiting for
// their streams. Pure host code (no CUDA types), so that the policy is tested without a GPU.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace smelt::cuda {

/// The most recently used items, each kept by a strong reference, at most `capacity` of them
/// unless more are held elsewhere: an item that someone besides the LRU still holds (a launch in
/// progress, a captured graph) is never let go, so dropping it could not unload anything. Not
/// thread-safe: the caller locks. Items let go are returned so that the caller releases them
/// after unlocking (releasing the last reference may do driver work).
template <class T>
class KeepLru {
 public:
  explicit KeepLru(size_t capacity) : capacity_(capacity) {}

  /// Marks `item` most recently used (adding it if new), then lets go of the least recently
  /// used items nobody else holds while there are more than the capacity. `item` itself is held
  /// by the caller, so it always stays.
  std::vector<std::shared_ptr<T>> use(const std::shared_ptr<T>& item) {
    if (auto it = pos_.find(item.get()); it != pos_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      return {};
    }
    order_.push_front(item);
    pos_.emplace(item.get(), order_.begin());
    return shrink();
  }

  /// Sets the capacity and returns the items let go to meet it.
  std::vector<std::shared_ptr<T>> set_capacity(size_t capacity) {
    capacity_ = capacity;
    return shrink();
  }

  /// Lets go of the least recently used items nobody else holds while there are more than the
  /// capacity (items held elsewhere when they were added may have been released since).
  std::vector<std::shared_ptr<T>> shrink() {
    std::vector<std::shared_ptr<T>> out;
    for (auto it = order_.end(); order_.size() > capacity_ && it != order_.begin();) {
      --it;
      if (it->use_count() > 1) continue;  // held elsewhere: dropping it would free nothing
      pos_.erase(it->get());
      out.push_back(std::move(*it));
      it = order_.erase(it);
    }
    return out;
  }

  size_t size() const { return order_.size(); }
  size_t capacity() const { return capacity_; }
  bool contains(const T* item) const { return pos_.count(item) != 0; }

 private:
  size_t capacity_;
  std::list<std::shared_ptr<T>> order_;  // front: the most recently used
  std::unordered_map<const T*, typename std::list<std::shared_ptr<T>>::iterator> pos_;
};

/// Releases that must wait until the work queued before them has run: each item waits on fences
/// (events recorded on the streams that used it), and is released once every fence has passed.
/// Not thread-safe: the caller locks.
template <class Item>
class DeferredReleases {
 public:
  void push(Item item) { items_.push_back(std::move(item)); }

  /// Moves out the items for which `ready(item)` says every fence has passed, in the order they
  /// were pushed; the others stay queued.
  template <class Ready>
  std::vector<Item> take_ready(Ready&& ready) {
    std::vector<Item> out, rest;
    for (Item& item : items_) (ready(item) ? out : rest).push_back(std::move(item));
    items_ = std::move(rest);
    return out;
  }

  /// How many queued items `pred` accepts.
  template <class Pred>
  size_t count_if(Pred&& pred) const {
    size_t n = 0;
    for (const Item& item : items_) n += pred(item) ? 1 : 0;
    return n;
  }

  size_t size() const { return items_.size(); }

 private:
  std::vector<Item> items_;
};

}  // namespace smelt::cuda
