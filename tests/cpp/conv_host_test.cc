// Host-only unit test of the conv launcher's building blocks that need no GPU:
// LruCache (plugins/common/lru_cache.h) and FastDiv (plugins/conv/conv_geometry.h),
// and, when CUDA's headers are on the include path (plan_cache.h includes conv.h,
// which includes cuda_runtime_api.h; nothing is linked), a micro-benchmark of our
// own part of a plan-cache hit: make_conv_key + the LRU lookup, as conv_prepare
// does it (prints "hit_path_ns <value>").
// Built and run by tests/test_host_cpp.py; prints "N passed, M failed".
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "plugins/common/lru_cache.h"
#include "plugins/conv/conv_geometry.h"
#include "tests/cpp/host_check.h"

#if defined(__has_include)
#if __has_include(<cuda_runtime_api.h>)
#define CONV_HOST_TEST_PLAN_CACHE 1
#include <chrono>

#include "plugins/conv/plan_cache.h"
#endif
#endif

namespace {

using host_check::check;

using trt_fastops::LruCache;
using trt_fastops::conv::FastDiv;

void test_lru_basics() {
  LruCache<int, std::string> c(2);
  check(!c.get(1).has_value(), "miss on empty cache");
  c.put(1, "a");
  c.put(2, "b");
  check(c.get(1).value_or("") == "a", "hit 1");  // 1 becomes most recent
  c.put(3, "c");                                 // evicts 2 (least recent)
  check(!c.peek(2).has_value(), "2 evicted");
  check(c.peek(1).value_or("") == "a" && c.peek(3).value_or("") == "c", "1 and 3 kept");
  c.put(1, "a2");  // replace keeps size
  check(c.size() == 2 && c.get(1).value_or("") == "a2", "replace");
  auto s = c.stats();
  check(s.hits == 2 && s.misses == 1 && s.insertions == 3 && s.replacements == 1 && s.evictions == 1,
        "stats " + std::to_string(s.hits) + "/" + std::to_string(s.misses) + "/" + std::to_string(s.insertions) + "/" +
            std::to_string(s.replacements) + "/" + std::to_string(s.evictions));
  check(c.erase(3) && !c.erase(3) && c.size() == 1, "erase");
  c.set_capacity(0);  // clamps to 1
  check(c.capacity() == 1 && c.size() == 1, "capacity clamp");
  c.put(7, "x");
  check(c.size() == 1 && c.peek(7).has_value() && !c.peek(1).has_value(), "capacity 1 keeps the newest");
  c.clear();
  check(c.size() == 0 && c.stats().evictions == 2, "clear keeps stats");
  c.reset_stats();
  check(c.stats().hits == 0 && c.stats().capacity == 1, "reset_stats");
}

void test_lru_order() {
  LruCache<int, int> c(3);
  for (int i = 0; i < 3; ++i) c.put(i, i);
  c.get(0);       // order (recent first): 0 2 1
  c.peek(1);      // peek does not touch the order
  c.put(3, 3);    // evicts 1
  check(!c.peek(1).has_value() && c.peek(0) && c.peek(2) && c.peek(3), "LRU order with get and peek");
  c.set_capacity(1);  // keeps only the most recent (3)
  check(c.size() == 1 && c.peek(3).has_value(), "shrinking keeps the most recent");
}

void test_lru_threads() {
  LruCache<int, std::shared_ptr<const int>> c(64);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 20000; ++i) {
        const int k = static_cast<int>(rng() % 100);
        if (auto v = c.get(k)) {
          if (**v != k * 3) ++wrong;
        } else {
          c.put(k, std::make_shared<const int>(k * 3));
        }
        if (i % 997 == 0) c.erase(k);
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto s = c.stats();
  check(wrong == 0, "concurrent values consistent");
  check(s.size <= 64 && s.hits + s.misses == 8u * 20000u, "concurrent counters (size " + std::to_string(s.size) + ")");
  check(s.insertions - s.evictions - s.erasures == s.size, "insertions - evictions - erasures == size");
}

void test_fastdiv() {
  std::mt19937_64 rng(5);
  int bad = 0;
  auto one = [&](uint32_t d, uint32_t n) {
    if (FastDiv(d).div(n) != n / d && bad++ < 5) std::printf("FastDiv(%u).div(%u) wrong\n", d, n);
  };
  for (uint32_t d = 1; d < 3000; ++d) {
    for (uint32_t n = 0; n < 3000; ++n) one(d, n);
    one(d, 0x7fffffffu);
    for (int i = 0; i < 50; ++i) one(d, static_cast<uint32_t>(rng() % 0x80000000u));
  }
  for (int i = 0; i < 200000; ++i) {
    const uint32_t d = 1 + static_cast<uint32_t>(rng() % 0x7fffffffu);
    one(d, static_cast<uint32_t>(rng() % 0x80000000u));
    one(d, d - 1);
    one(d, d);
    one(d, 0x7fffffffu);
  }
  check(bad == 0, "FastDiv exact for n < 2^31");
  check(FastDiv(0).div(12345) == 12345, "FastDiv(0) acts as division by 1");
}

#if defined(CONV_HOST_TEST_PLAN_CACHE)
// conv_prepare's hit path without the CUDA calls: key from the params, LRU get
// (mutex, hash, recency splice, shared_ptr copy), in a cache holding a
// ResNet-50-sized set of signatures.
void bench_hit_path() {
  using trt_fastops::conv::ConvKey;
  using trt_fastops::conv::ConvParams;
  LruCache<ConvKey, std::shared_ptr<const int>, trt_fastops::PodKeyHash<ConvKey>> cache(256);
  ConvParams p;
  p.dtype = trt_fastops::DType::f16;
  p.n = 32, p.c_in = 64, p.c_out = 64;
  p.in[0] = p.in[1] = p.out[0] = p.out[1] = 56;
  p.kernel[0] = p.kernel[1] = 3;
  p.pad_begin[0] = p.pad_begin[1] = p.pad_end[0] = p.pad_end[1] = 1;
  alignas(256) static char buf[1024];
  p.x = buf, p.w = buf + 256, p.bias = buf + 512, p.y = buf + 768;
  for (int c = 0; c < 150; ++c) {  // other signatures
    ConvParams q = p;
    q.c_out = 8 * (c + 1);
    cache.put(trt_fastops::conv::make_conv_key(q, 0, 0), std::make_shared<const int>(c));
  }
  cache.put(trt_fastops::conv::make_conv_key(p, 0, 0), std::make_shared<const int>(-1));
  constexpr int kIters = 200000;
  int64_t sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) {
    const ConvKey key = trt_fastops::conv::make_conv_key(p, 0, 0);
    if (auto hit = cache.get(key)) sink += **hit;
  }
  const auto t1 = std::chrono::steady_clock::now();
  const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / kIters;
  std::printf("hit_path_ns %.1f\n", ns);
  check(sink == -int64_t(kIters), "every lookup hits the same plan");
  check(ns < 5000.0, "key + LRU hit under 5 us (generous: shared CI machines)");
}
#endif

}  // namespace

int main() {
  test_lru_basics();
  test_lru_order();
  test_lru_threads();
  test_fastdiv();
#if defined(CONV_HOST_TEST_PLAN_CACHE)
  bench_hit_path();
#endif
  return host_check::report();
}
