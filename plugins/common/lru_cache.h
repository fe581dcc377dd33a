// Bounded, thread-safe least-recently-used map. Framework-free, host only.
//
//   LruCache<ConvKey, std::shared_ptr<const ConvPlan>, PodKeyHash<ConvKey>> cache(256);
//   if (auto hit = cache.get(key)) use(*hit); else cache.put(key, build(key));
//
// Values are copied out under the lock, so Value should be cheap to copy (a
// shared_ptr to something immutable): a caller keeps using what it got even
// after another thread evicts or replaces the entry. Every operation takes one
// mutex; lookups are O(1) (hash map into an intrusive recency list).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

namespace trt_fastops {

// Hash of a plain key struct made of int64 words and no padding (the plan keys
// static_assert their size): a splitmix64 finaliser of each word, folded in.
template <typename Key>
struct PodKeyHash {
  static_assert(sizeof(Key) % sizeof(int64_t) == 0, "PodKeyHash: a key of whole int64 words");
  size_t operator()(const Key& k) const {
    int64_t words[sizeof(Key) / sizeof(int64_t)];
    std::memcpy(words, &k, sizeof(Key));
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int64_t w : words) {
      uint64_t z = static_cast<uint64_t>(w) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      h ^= z ^ (z >> 31);
    }
    return static_cast<size_t>(h);
  }
};

// A cache's capacity from environment variable `name` (entries, >= 1), or `fallback`.
inline size_t cache_capacity_from_env(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || n < 1) return fallback;
  return static_cast<size_t>(n);
}

struct LruCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t insertions = 0;  // put() of a new key
  uint64_t replacements = 0;  // put() of a key already present
  uint64_t evictions = 0;  // entries dropped for capacity
  uint64_t erasures = 0;  // erase() that removed something
  size_t size = 0;
  size_t capacity = 0;
};

template <typename Key, typename Value, typename Hash = std::hash<Key>, typename Eq = std::equal_to<Key>>
class LruCache {
 public:
  // capacity 0 is taken as 1: the cache always holds at least the last entry.
  explicit LruCache(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

  LruCache(const LruCache&) = delete;
  LruCache& operator=(const LruCache&) = delete;

  // The value for key (and marks it most recently used), or nullopt.
  std::optional<Value> get(const Key& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++stats_.misses;
      return std::nullopt;
    }
    ++stats_.hits;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  // Like get() but counts neither a hit nor a miss and keeps the recency order.
  std::optional<Value> peek(const Key& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    return it->second->second;
  }

  // Inserts or replaces; the entry becomes most recently used. Drops least
  // recently used entries beyond the capacity.
  void put(const Key& key, Value value) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      it->second->second = std::move(value);
      order_.splice(order_.begin(), order_, it->second);
      ++stats_.replacements;
      return;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(order_.front().first, order_.begin());
    ++stats_.insertions;
    trim_locked();
  }

  // Removes key; true when it was present.
  bool erase(const Key& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    order_.erase(it->second);
    index_.erase(it);
    ++stats_.erasures;
    return true;
  }

  // Drops every entry; statistics keep counting (reset_stats() clears them).
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    index_.clear();
    order_.clear();
  }

  void set_capacity(size_t capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    capacity_ = capacity == 0 ? 1 : capacity;
    trim_locked();
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return index_.size();
  }

  size_t capacity() const {
    std::lock_guard<std::mutex> lock(mu_);
    return capacity_;
  }

  LruCacheStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    LruCacheStats s = stats_;
    s.size = index_.size();
    s.capacity = capacity_;
    return s;
  }

  void reset_stats() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_ = LruCacheStats{};
  }

 private:
  using Entry = std::pair<Key, Value>;
  using List = std::list<Entry>;

  void trim_locked() {
    while (index_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
      ++stats_.evictions;
    }
  }

  mutable std::mutex mu_;
  size_t capacity_;
  List order_;  // front: most recently used
  // List iterators stay valid across splices, so the index maps straight to nodes.
  std::unordered_map<Key, typename List::iterator, Hash, Eq> index_;
  LruCacheStats stats_;
};

}  // namespace trt_fastops
