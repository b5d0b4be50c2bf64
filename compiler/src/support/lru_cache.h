#pragma once
/** A thread-safe map from string keys to shared values that keeps the `capacity` most recently
 * used entries (like oneDNN's primitive cache): the one policy for tbex's in-process caches.
 * An evicted value stays alive for whoever still holds it. */
#include <algorithm>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace tbex::support {

struct LruStats {
  int64_t hits = 0, misses = 0, evictions = 0, size = 0, capacity = 0;
};

template <class V>
class LruCache {
 public:
  /** capacity() is asked at each insert, so a knob change takes effect on the next one. */
  explicit LruCache(std::function<int64_t()> capacity) : capacity_(std::move(capacity)) {}

  /** The value of `key` (marked most recently used), or null (counted as a miss). */
  std::shared_ptr<V> find(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return nullptr;
    }
    ++stats_.hits;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  /** Inserts `value` unless `key` is already there (another thread compiled it first); returns
   * the cached value. Evicts the least recently used entries past the capacity; returns how many
   * through `evicted` when given. */
  std::shared_ptr<V> insert(const std::string& key, std::shared_ptr<V> value, int64_t* evicted = nullptr) {
    const int64_t cap = capacity_();
    std::lock_guard<std::mutex> l(mu_);
    std::shared_ptr<V> kept = value;
    if (auto it = index_.find(key); it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      kept = it->second->second;
    } else if (cap > 0) {
      order_.emplace_front(key, std::move(value));
      index_[key] = order_.begin();
    }
    int64_t n = 0;
    while ((int64_t)order_.size() > std::max<int64_t>(cap, 0)) {
      index_.erase(order_.back().first);
      order_.pop_back();
      ++n;
    }
    stats_.evictions += n;
    if (evicted) *evicted = n;
    return kept;
  }

  void clear() {
    std::lock_guard<std::mutex> l(mu_);
    order_.clear();
    index_.clear();
  }

  LruStats stats() const {
    std::lock_guard<std::mutex> l(mu_);
    LruStats s = stats_;
    s.size = (int64_t)order_.size();
    s.capacity = capacity_();
    return s;
  }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<V>>;
  std::function<int64_t()> capacity_;
  mutable std::mutex mu_;
  std::list<Entry> order_;  ///< most recently used first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
  LruStats stats_;
};

}  // namespace tbex::support
