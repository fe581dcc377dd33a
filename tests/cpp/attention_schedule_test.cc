// Host-only unit test of the attention launcher's schedule model
// (plugins/attention/attention_schedule.h): causal_makespan against a
// tile-by-tile walk of the kernels' order (tile_head's sections,
// persistent_tile's snake), causal_section_heads's picks on
// bench_attention's grids, even_round_grid, and causal_tail (against a walk, and against
// its first form). Built and run by tests/test_host_cpp.py; prints "N passed, M failed"
// and the host's cost of costing a causal grid ("first_launch_us").
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "plugins/attention/attention_schedule.h"
#include "tests/cpp/host_check.h"

namespace {

using host_check::check;

using trt_fastops::attention::CAUSAL_TILES_PER_HEAD_MAX;
using trt_fastops::attention::causal_budget_mib;
using trt_fastops::attention::causal_draws;
using trt_fastops::attention::causal_fallback_mib;
using trt_fastops::attention::DRAWN_TILES_PER_HEAD_MIN;
using trt_fastops::attention::causal_makespan;
using trt_fastops::attention::causal_section_heads;
using trt_fastops::attention::causal_tile_cost;
using trt_fastops::attention::causal_tail;
using trt_fastops::attention::CausalGrid;
using trt_fastops::attention::CausalTail;
using trt_fastops::attention::section_tile_block;
using trt_fastops::attention::TAIL_ENTRIES;
using trt_fastops::attention::TAIL_GAIN_MIN;
using trt_fastops::attention::TAIL_NONE;
using trt_fastops::attention::even_round_grid;
using trt_fastops::attention::make_causal_grid;

// The kernels' walk, one tile at a time: CTA c runs tile it * G + c on even
// rounds and it * G + G - 1 - c on odd ones; tile_head maps a tile to its
// section, head and query block (the last block first).
double walked_makespan(const CausalGrid& g, int64_t section) {
  std::vector<double> work(size_t(g.grid), 0.0);
  const int64_t tiles = g.heads * g.m_blocks, per_section = section * g.m_blocks;
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t it = tile / g.grid, pos = tile % g.grid;
    const int64_t cta = (it & 1) ? g.grid - 1 - pos : pos;
    const int64_t s = tile / per_section, first = s * section;
    const int64_t heads = std::min(section, g.heads - first);
    const int64_t q = (tile - s * per_section) / heads;
    work[size_t(cta)] += causal_tile_cost(g, g.m_blocks - 1 - q);
  }
  return *std::max_element(work.begin(), work.end());
}

// A causal grid of batch x heads_per_batch heads as the launcher builds it (make_causal_grid).
CausalGrid causal_grid(int64_t batch, int64_t heads_per_batch, int64_t seqlen, int64_t head_dim, int64_t grid_ctas) {
  const int64_t block_m = head_dim == 64 ? 192 : 128, m = (seqlen + block_m - 1) / block_m;
  const int64_t heads = batch * heads_per_batch;
  return make_causal_grid(seqlen, seqlen, 0, block_m, 128, m, m * block_m - seqlen, heads,
                          std::min(grid_ctas, heads * m), seqlen * head_dim * 4, int(head_dim));
}

// bench_attention's grids: 16k tokens, hidden 2048.
CausalGrid bench_grid(int64_t seqlen, int64_t head_dim, int64_t grid_ctas) {
  return causal_grid(16384 / seqlen, 2048 / head_dim, seqlen, head_dim, grid_ctas);
}

void test_makespan_matches_walk() {
  std::mt19937 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    CausalGrid g{};
    g.block_m = pick(0, 2) == 0 ? 64 : pick(0, 1) ? 128 : 192;
    g.block_n = pick(0, 1) ? 64 : 128;
    g.q_len = pick(1, 3000);
    g.key_end = pick(0, 4) == 0 ? pick(0, g.q_len) : g.q_len + pick(0, 300);
    g.causal_offset = pick(-100, 400);
    g.m_blocks = (g.q_len + g.block_m - 1) / g.block_m;
    g.m_shift = pick(0, 1) ? g.m_blocks * g.block_m - g.q_len : 0;
    g.heads = pick(1, 300);
    g.grid = std::min(pick(1, 140), g.heads * g.m_blocks);
    const int64_t section = pick(1, g.heads + 3);
    const double fast = causal_makespan(g, section, [&] {
      std::vector<double> c(size_t(g.m_blocks));
      for (int64_t j = 0; j < g.m_blocks; ++j) c[size_t(j)] = causal_tile_cost(g, j);
      return c;
    }());
    const double walked = walked_makespan(g, section);
    check(std::fabs(fast - walked) <= 1e-9 * std::max(1.0, walked),
          "makespan trial " + std::to_string(trial) + ": " + std::to_string(fast) + " vs walked " +
              std::to_string(walked));
  }
}

void test_bench_picks() {
  // bench_attention's causal grids on 132 SMs: {seqlen, head dim, expected section heads}.
  // d64 1k: 32 heads (8 MiB, the fallback) leave the longest CTA 4.9 % above the mean; within the
  // 10 MiB budget 33 heads balance; 2k keeps 16, 4k and 8k their fallbacks (8 and 16 heads); d128
  // keeps its 2 MiB sections.
  const int64_t cases[][3] = {{512, 64, 66},  {1024, 64, 33}, {2048, 64, 16}, {4096, 64, 8}, {8192, 64, 16},
                              {512, 128, 8},  {1024, 128, 4}, {2048, 128, 2}, {4096, 128, 1}};
  for (const auto& c : cases) {
    const CausalGrid g = bench_grid(c[0], c[1], 132);
    const int64_t got = causal_section_heads(g);
    check(got == c[2], "seqlen " + std::to_string(c[0]) + " d" + std::to_string(c[1]) + ": " + std::to_string(got) +
                           " heads, expected " + std::to_string(c[2]));
    // Never worse than the fallback by the model, and within the L2 budget.
    check(walked_makespan(g, got) <= walked_makespan(g, g.fallback) + 1e-9, "no worse than the fallback");
    check(got == g.fallback || got <= g.max_section, "within the budget");
  }
}

void test_budget() {
  // d64: 10 MiB, or 16 where every head's K/V fits in 16 MiB; d128 keeps its fallback's 2 MiB.
  check(causal_budget_mib(64, 8, 16) == 16, "d64, all K/V within 16 MiB: 16");
  check(causal_budget_mib(64, 8, 17) == 10, "d64, more K/V: 10");
  check(causal_budget_mib(128, 2, 1) == 2, "d128: the fallback's");
  // Small grids keep the sections item 61 measured fastest: {batch, heads, seqlen, expected}.
  const int64_t cases[][4] = {{3, 16, 700, 48}, {4, 16, 600, 64}, {4, 12, 900, 48}, {1, 64, 1000, 64}};
  for (const auto& c : cases) {
    const int64_t got = causal_section_heads(causal_grid(c[0], c[1], c[2], 64, 132));
    check(got == c[3], "B" + std::to_string(c[0]) + " H" + std::to_string(c[1]) + " S" + std::to_string(c[2]) +
                           ": " + std::to_string(got) + " heads, expected " + std::to_string(c[3]));
  }
}

void test_degenerate_grids() {
  CausalGrid g = bench_grid(1024, 64, 132);
  g.max_section = 1;
  check(causal_section_heads(g) == g.fallback, "one head allowed: the fallback");
  g = bench_grid(1024, 64, 1);
  check(causal_section_heads(g) == g.fallback, "one CTA: the fallback");
  g = bench_grid(1024, 64, 132);
  g.heads = 100000;  // beyond SECTION_MODEL_ROUNDS_MAX rounds: not costed
  check(causal_section_heads(g) == g.fallback, "many rounds: the fallback");
  g = bench_grid(1024, 64, 132);
  g.fallback = 0;
  check(causal_section_heads(g) >= 1, "a section of at least one head");
}

void test_even_round_grid() {
  // bench_attention's non-causal grids of whole tiles (d128, d64 at 512 / 1k): 2048 tiles.
  check(even_round_grid(2048, 132) == 128, "2048 tiles: 128 CTAs of 16");
  check(even_round_grid(4096, 132) == 128, "4096 tiles: 128 CTAs of 32");
  check(even_round_grid(200, 132) == 100, "200 tiles: 100 CTAs of 2");
  check(even_round_grid(132 * 5, 132) == 132, "whole rounds: every SM");
  check(even_round_grid(100, 132) == 132, "one round: unchanged (the launcher's grid is the tiles)");
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const int grid = 1 + int(rng() % 300);
    const int64_t tiles = 1 + int64_t(rng() % 100000);
    const int g = even_round_grid(tiles, grid);
    const int64_t rounds = (tiles + grid - 1) / grid;
    if (tiles <= grid) {
      check(g == grid, "a round or less: unchanged");
      continue;
    }
    check(g >= 1 && g <= grid && (tiles + g - 1) / g == rounds, "as many rounds on no more CTAs");
    check(g == 1 || (tiles + g - 2) / (g - 1) > rounds, "the fewest CTAs that keep the rounds");
  }
}

void test_causal_draws() {
  // bench_attention's causal grids (query blocks a head): d128 4k 32, 8k 64; d64 (192 rows) 4k 22, 8k 43.
  check(!causal_draws(32) && causal_draws(64), "d128: 8k draws, 4k keeps the computed order");
  check(!causal_draws(22) && causal_draws(43), "d64: 8k draws, 4k keeps the computed order");
  check(causal_draws(DRAWN_TILES_PER_HEAD_MIN) && !causal_draws(DRAWN_TILES_PER_HEAD_MIN - 1), "the threshold");
  // Without a workspace, heads past CAUSAL_TILES_PER_HEAD_MAX still get a CTA per tile.
  check(causal_fallback_mib(128, CAUSAL_TILES_PER_HEAD_MAX + 1) == 0, "no workspace: a CTA per tile");
  check(DRAWN_TILES_PER_HEAD_MIN <= CAUSAL_TILES_PER_HEAD_MAX, "every CTA-per-tile grid draws when it can");
}


// The kernels' walk with a tail table (persistent_tile<true>): the snake up to round t.round, then
// each CTA's list. Every tile runs exactly once; returns the longest CTA's work.
double walked_tail_makespan(const CausalGrid& g, int64_t section, const CausalTail& t, bool* each_once) {
  const int64_t tiles = g.heads * g.m_blocks;
  std::vector<int> runs(size_t(tiles), 0);
  std::vector<double> work(size_t(g.grid), 0.0);
  for (int64_t c = 0; c < g.grid; ++c) {
    for (int64_t it = 0;; ++it) {
      int64_t tile;
      if (t.round > 0 && it >= t.round) {
        const uint16_t id = t.tiles[size_t((it - t.round) * g.grid + c)];  // the kernel reads no further
        tile = id == TAIL_NONE ? tiles : id;
      } else {
        tile = it * g.grid + ((it & 1) ? g.grid - 1 - c : c);
      }
      if (tile >= tiles) break;
      ++runs[size_t(tile)];
      work[size_t(c)] += causal_tile_cost(g, section_tile_block(g, section, tile));
    }
  }
  *each_once = std::all_of(runs.begin(), runs.end(), [](int r) { return r == 1; });
  return *std::max_element(work.begin(), work.end());
}

// causal_tail as first written (session 60): every tile's cost from section_tile_block, the LPT
// by a scan for the least-loaded CTA. causal_tail's faster form must give the same table.
CausalTail reference_causal_tail(const CausalGrid& g, int64_t section) {
  using trt_fastops::attention::TAIL_ROUNDS;
  CausalTail t;
  const int64_t tiles = g.heads * g.m_blocks, grid = g.grid;
  if (section < 1 || grid < 2 || tiles >= TAIL_NONE || tiles <= 2 * grid) return t;
  int64_t round = tiles / grid - TAIL_ROUNDS;
  round -= round & 1;
  if (round < 2) return t;
  const auto tile_cost = [&](int64_t tile) { return causal_tile_cost(g, section_tile_block(g, section, tile)); };
  std::vector<double> work(size_t(grid), 0.0), snake(size_t(grid), 0.0);
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t it = tile / grid, pos = tile % grid, cta = (it & 1) ? grid - 1 - pos : pos;
    snake[size_t(cta)] += tile_cost(tile);
    if (it < round) work[size_t(cta)] += tile_cost(tile);
  }
  std::vector<int64_t> rest;
  for (int64_t tile = round * grid; tile < tiles; ++tile) rest.push_back(tile);
  std::stable_sort(rest.begin(), rest.end(), [&](int64_t x, int64_t y) { return tile_cost(x) > tile_cost(y); });
  std::vector<std::vector<int64_t>> columns(static_cast<size_t>(grid));
  for (const int64_t tile : rest) {
    const size_t cta = size_t(std::min_element(work.begin(), work.end()) - work.begin());
    work[cta] += tile_cost(tile);
    columns[cta].push_back(tile);
  }
  t.makespan = *std::max_element(work.begin(), work.end());
  t.snake_makespan = *std::max_element(snake.begin(), snake.end());
  size_t longest = 0;
  for (const auto& column : columns) longest = std::max(longest, column.size());
  const int64_t rows = int64_t(longest) + 1;
  if (rows * grid > TAIL_ENTRIES || t.makespan > t.snake_makespan * (1.0 - TAIL_GAIN_MIN)) return t;
  t.round = round;
  t.rows = rows;
  t.tiles.assign(size_t(rows * grid), TAIL_NONE);
  for (int64_t c = 0; c < grid; ++c)
    for (size_t r = 0; r < columns[size_t(c)].size(); ++r)
      t.tiles[r * size_t(grid) + size_t(c)] = uint16_t(columns[size_t(c)][r]);
  return t;
}

void test_causal_tail_matches_reference() {
  // Every field equal, the table entry for entry, on random causal grids (d64 and d128, 1-8 x
  // 1-48 heads, 64-6k tokens, 2-132 CTAs), each in the launcher's section and in a random one.
  std::mt19937_64 rng(61);
  int tables = 0, compared = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t d = rng() % 2 ? 64 : 128, batch = 1 + int64_t(rng() % 8), heads = 1 + int64_t(rng() % 48);
    const int64_t seqlen = 64 + int64_t(rng() % 6000), ctas = 2 + int64_t(rng() % 131);
    const CausalGrid g = causal_grid(batch, heads, seqlen, d, ctas);
    for (const int64_t section : {causal_section_heads(g), 1 + int64_t(rng() % uint64_t(g.heads))}) {
      const CausalTail got = causal_tail(g, section), want = reference_causal_tail(g, section);
      const std::string name = "trial " + std::to_string(trial) + " (" + std::to_string(batch) + "x" +
                               std::to_string(heads) + "x" + std::to_string(seqlen) + " d" + std::to_string(d) +
                               " on " + std::to_string(g.grid) + ", sections of " + std::to_string(section) + ")";
      const bool same = got.round == want.round && got.rows == want.rows && got.tiles == want.tiles &&
                        got.makespan == want.makespan && got.snake_makespan == want.snake_makespan;
      check(same, name + ": causal_tail as the reference");
      if (!same) return;
      tables += got.round > 0;
      ++compared;
    }
  }
  check(compared == 6000 && tables > 100, "the sweep takes tables (" + std::to_string(tables) + " of " +
                                              std::to_string(compared) + ")");
}

// A grid's first launch costs the host causal_section_heads and causal_tail (then cached);
// printed for tests/test_host_cpp.py, not asserted (timings belong in benchmarks).
void print_first_launch_cost() {
  double section_us = 0.0, tail_us = 0.0;
  int n = 0;
  for (const int64_t s : {512, 1024, 2048, 4096})
    for (const int64_t d : {64, 128}) {
      const CausalGrid g = bench_grid(s, d, 132);
      double best_section = INFINITY, best_tail = INFINITY;
      for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        const int64_t section = causal_section_heads(g);
        const auto t1 = std::chrono::steady_clock::now();
        const CausalTail tail = causal_tail(g, section);
        const auto t2 = std::chrono::steady_clock::now();
        check(tail.snake_makespan > 0.0, "timed a real table");
        best_section = std::min(best_section, std::chrono::duration<double, std::micro>(t1 - t0).count());
        best_tail = std::min(best_tail, std::chrono::duration<double, std::micro>(t2 - t1).count());
      }
      section_us += best_section, tail_us += best_tail, ++n;
    }
  std::printf("first_launch_us section %.1f tail %.1f (means over bench_attention's 8 causal grids)\n",
              section_us / n, tail_us / n);
}

void test_causal_tail() {
  // On 132 SMs, in the sections the launcher picks: bench_attention's causal grids (2048 tiles at
  // d128, 3072 / 2816 at d64), where the snake ends 1.3-3.8 % above the mean and the table would
  // save under TAIL_GAIN_MIN (item 104: level there at the power limit), take none; grids the
  // snake leaves ragged (4-20 rounds with a deep last one) take it and end within 8 % of the
  // mean (3x32x700 d128: 1.26 -> 1.077).
  struct Case {
    int64_t batch, heads, seqlen, head_dim;
    bool table;
  };
  std::vector<Case> cases;
  for (const int64_t s : {512, 1024, 2048, 4096})
    for (const int64_t d : {64, 128}) cases.push_back({16384 / s, 2048 / d, s, d, false});
  cases.insert(cases.end(), {{1, 96, 1024, 64, true}, {8, 12, 1024, 64, true}, {2, 32, 2048, 64, true},
                             {1, 40, 2048, 128, true}, {2, 40, 4096, 128, true}, {3, 32, 700, 128, true},
                             {6, 16, 1000, 64, true}, {1, 32, 4096, 128, false}, {4, 32, 1024, 128, false},
                             {2, 16, 4096, 128, false}, {8, 16, 1024, 64, false}});
  for (const Case& c : cases) {
    const CausalGrid g = causal_grid(c.batch, c.heads, c.seqlen, c.head_dim, 132);
    const int64_t section = causal_section_heads(g);
    const CausalTail t = causal_tail(g, section);
    const std::string name = std::to_string(c.batch) + "x" + std::to_string(c.heads) + "x" + std::to_string(c.seqlen) +
                             " d" + std::to_string(c.head_dim);
    bool once = false;
    const double snake = walked_tail_makespan(g, section, CausalTail{}, &once);
    check(once, name + ": the snake runs every tile once");
    check(std::fabs(snake - t.snake_makespan) <= 1e-9 * snake, name + ": the table's snake makespan is the walk's");
    check((t.round > 0) == c.table, name + (c.table ? ": takes a table" : ": takes no table"));
    if (t.round == 0) {
      check(t.makespan > t.snake_makespan * (1.0 - TAIL_GAIN_MIN) || t.makespan == 0.0,
            name + ": no table only where it saves under TAIL_GAIN_MIN");
      continue;
    }
    const double with = walked_tail_makespan(g, section, t, &once);
    check(once, name + ": with the table every tile runs once");
    check(std::fabs(with - t.makespan) <= 1e-9 * with, name + ": the table's makespan is the walk's");
    check(with < snake, name + ": the table shortens the longest CTA");
    check(t.round % 2 == 0 && t.round >= 2, name + ": an even count of snake rounds first");
    check(int64_t(t.tiles.size()) == t.rows * g.grid && t.rows * g.grid <= TAIL_ENTRIES, name + ": the table's size");
    for (int64_t c = 0; c < g.grid; ++c)
      check(t.tiles[size_t((t.rows - 1) * g.grid + c)] == TAIL_NONE, name + ": every column ends in TAIL_NONE");
    double total = 0.0;
    for (int64_t tile = 0; tile < g.heads * g.m_blocks; ++tile)
      total += causal_tile_cost(g, section_tile_block(g, section, tile));
    check(with <= 1.08 * total / double(g.grid),
          name + ": within 8 % of the mean, got " + std::to_string(with / (total / double(g.grid))));
    check(with <= (1.0 - TAIL_GAIN_MIN) * snake, name + ": saves at least TAIL_GAIN_MIN");
  }
  // No table: more CTAs than its entries hold a column for, tile ids past 16 bits, too short a grid.
  CausalGrid g = bench_grid(1024, 128, 132);
  g.grid = TAIL_ENTRIES / 2;
  check(causal_tail(g, causal_section_heads(g)).round == 0, "columns of two entries: none");
  g = causal_grid(1, 8, 1024, 128, 132);  // 64 tiles: under a round
  check(causal_tail(g, 4).round == 0, "under two rounds: none");
  g = causal_grid(64, 16, 8192, 128, 132);  // 65536 tiles
  check(causal_tail(g, 1).round == 0, "tiles past 16 bits: none");
}

}  // namespace

int main() {
  test_makespan_matches_walk();
  test_bench_picks();
  test_budget();
  test_degenerate_grids();
  test_even_round_grid();
  test_causal_draws();
  test_causal_tail();
  test_causal_tail_matches_reference();
  print_first_launch_cost();
  return host_check::report();
}
