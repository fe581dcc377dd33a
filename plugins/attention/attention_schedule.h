// How the persistent attention kernels' tiles fall on their CTAs: the rules
// the launcher costs grids by. Host only, framework-free (tests/cpp builds it
// without CUDA). The kernels' side is persistent_tile and tile_head
// (attention_hopper_ws.cuh, attention_kernels.cuh).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <utility>
#include <vector>

namespace trt_fastops::attention {

// persistent_tile's balance_ways for `tiles` head-major tiles (m_blocks a
// head, the first partial) on `grid` CTAs: the CTAs that run one tile more
// than the rest (tiles % grid), or all of them where that is fewer than one
// round's partial tiles. 0 (the plain order) without partial tiles, with one
// tile a head or one round, or with fewer heads than ways: then some CTA with
// the extra tile keeps only full ones and the longest runs as long as in the
// plain order (bench/NOTES-attention-log.md item 60).
inline int balance_ways(int64_t tiles, int grid, int m_blocks, bool partial) {
  if (!partial || m_blocks < 2 || grid <= 0 || tiles <= grid) return 0;
  const int extra = int(tiles % grid);
  const int per_round = (grid + m_blocks - 1) / m_blocks + 1;  // partial tiles a round can hold
  const int ways = extra >= per_round ? extra : grid;
  return tiles / m_blocks >= ways ? ways : 0;
}

// The CTAs a persistent grid of equal tiles needs: with ceil(tiles / grid)
// rounds either way, ceil(tiles / rounds) CTAs run them all (2048 tiles on
// 132 SMs: 128 CTAs of 16 tiles, where 68 of 132 would run a 16th alone). The
// makespan in tiles is the same; the SMs left out draw no power, so on a
// power-bound card the others hold a higher clock (bench/NOTES-attention-log.md item 65).
inline int even_round_grid(int64_t tiles, int grid) {
  if (grid <= 0 || tiles <= grid) return grid;
  const int64_t rounds = (tiles + grid - 1) / grid;
  return int((tiles + rounds - 1) / rounds);
}

// The longest CTA's work on a persistent grid of `grid` CTAs, in full tiles:
// ceil(tiles / grid), less what the partial tiles save where balance_ways
// deals them (each costs `partial_cost` of a full tile).
inline double persistent_rounds(int64_t tiles, int grid, int m_blocks, bool partial, double partial_cost) {
  const double rounds = double((tiles + grid - 1) / grid);
  const int ways = balance_ways(tiles, grid, m_blocks, partial);
  if (ways == 0) return rounds;
  const double heads = double(tiles / m_blocks), saved = 1.0 - partial_cost;
  const double lower = ways == grid ? (double(tiles) - heads * saved) / grid : double(tiles / grid);
  return std::max(lower, rounds - double(int64_t(heads) / ways) * saved);
}

// A causal grid on a persistent kernel: tile_head's order (sections of heads;
// within one, every head's last query block, then the next to last, ...) and
// persistent_tile's snake (round `it` runs tiles [it * grid, it * grid + grid),
// reversed on odd rounds). A plain struct of int64 words: the schedule cache's key.
struct CausalGrid {
  int64_t q_len, key_end, causal_offset;  // key_end: keys from it are masked for every row
  int64_t block_m, block_n, m_blocks, m_shift;
  int64_t heads, grid;                    // batch * q_heads; CTAs
  int64_t max_section, fallback;          // section heads allowed (K/V in L2), the rule's choice without a model
  bool operator==(const CausalGrid& o) const { return std::memcmp(this, &o, sizeof(CausalGrid)) == 0; }
};

// Heads whose K/V (kv_head_bytes each) fit in `mib` MiB, at least one and at
// most `heads`: a section size, or a budget for one.
inline int64_t heads_within(int64_t mib, int64_t kv_head_bytes, int64_t heads) {
  return std::clamp<int64_t>((mib << 20) / std::max<int64_t>(kv_head_bytes, 1), 1, std::max<int64_t>(heads, 1));
}

// A tile's cost in key blocks: its blocks (block_work's n_blocks) and a fixed
// part, about what its first S with its softmax, its last P V and its
// epilogue leave unoverlapped (bench/NOTES-attention-log.md item 43). The choice
// below is the same for fixed parts of 0.5 to 3 blocks on bench_attention's grids.
inline constexpr double TILE_FIXED_BLOCKS = 1.5;
inline double causal_tile_cost(const CausalGrid& g, int64_t m_block) {
  const int64_t m0 = m_block * g.block_m - g.m_shift;
  const int64_t n_end = std::min(g.key_end, m0 + g.block_m + g.causal_offset);
  return double(n_end > 0 ? (n_end + g.block_n - 1) / g.block_n : 0) + TILE_FIXED_BLOCKS;
}

// tile_head's order on persistent_tile's snake, by runs: each section's query
// blocks, the last first, are runs of one cost (level_cost[block]) over the
// section's heads, and a run lands on a range of CTAs in each round it reaches
// (odd rounds reversed). Calls f(round, first CTA, count, cost, first tile) per
// piece, so a grid costs O(runs + rounds), not O(tiles).
template <typename F>
inline void for_each_snake_run(const CausalGrid& g, int64_t section, const std::vector<double>& level_cost, F&& f) {
  int64_t tile = 0, it = 0, pos = 0;  // the next tile, its round and its position in the round
  for (int64_t first = 0; first < g.heads; first += section) {
    const int64_t in_section = std::min(section, g.heads - first);
    for (int64_t q = 0; q < g.m_blocks; ++q) {
      const double cost = level_cost[size_t(g.m_blocks - 1 - q)];
      for (int64_t left = in_section; left > 0;) {
        const int64_t n = std::min(left, g.grid - pos);
        f(it, (it & 1) ? g.grid - pos - n : pos, n, cost, tile);
        tile += n, left -= n, pos += n;
        if (pos == g.grid) pos = 0, ++it;
      }
    }
  }
}

// The longest CTA's work with sections of `section` heads, in key blocks: the
// runs above into a difference array, O(runs + rounds + grid).
inline double causal_makespan(const CausalGrid& g, int64_t section, const std::vector<double>& level_cost) {
  std::vector<double> diff(size_t(g.grid) + 1, 0.0);
  for_each_snake_run(g, section, level_cost, [&](int64_t, int64_t lo, int64_t n, double cost, int64_t) {
    diff[size_t(lo)] += cost;
    diff[size_t(lo + n)] -= cost;
  });
  double run = 0.0, longest = 0.0;
  for (int64_t c = 0; c < g.grid; ++c) longest = std::max(longest, run += diff[size_t(c)]);
  return longest;
}

// How causal inputs run on a persistent kernel (H100, scripts/tune_attention.py,
// every schedule timed interleaved): with many query blocks per head a CTA per
// tile (the hardware's dynamic balance: d128 16k 638 against 395-477 TFLOP/s
// persistent), else the persistent grid with tiles heaviest first in sections
// of heads whose K/V take 2 MiB (d128: 1.2-1.3x the other sections at 512-4k)
// or, at d64, 8 MiB up to 32 query blocks a head (2-32 MiB within 5 %, 32 MiB
// 3 % behind at 1k) and 32 MiB beyond (8k: 1.06x 8 MiB, 1.02x a CTA per tile;
// bench/NOTES-attention-log.md item 58). Those are the fallbacks: by default the
// launcher takes a section size that balances the grid, within
// causal_budget_mib's K/V (causal_section_heads; items 61-63).
inline constexpr int CAUSAL_TILES_PER_HEAD_MAX = 48;
inline int causal_fallback_mib(int head_dim_bucket, int64_t m_blocks) {
  if (m_blocks > CAUSAL_TILES_PER_HEAD_MAX) return 0;
  if (head_dim_bucket > 64) return 2;
  return m_blocks > 32 ? 32 : 8;
}

// Causal grids whose launch has a workspace may draw their tiles from a
// counter instead (FlashArgs::tile_counter, FlashAttention-3's dynamic
// scheduler): a CTA takes the next tile of the order when it starts one, so
// uneven tiles balance without a model, in sections of heads whose K/V take
// DRAWN_SECTION_MIB (the order's heaviest-first sections). Settled on the H100
// (fp16, 16k tokens, bench/NOTES-attention-log.md item 68), drawn against the
// computed order: d128 8k 552 against 528 TFLOP/s (a CTA per tile), 16k 587
// against 583; d64 8k 462 against 452 (the model's sections), 16k 484 against
// 467 (a CTA per tile); but d128 4k 510 against 534 and d64 4k 433 against
// 434: with 32 query blocks a head or fewer the model's sections balance the
// grid and the computed order has no per-tile hand-over. So more than 32 query
// blocks a head draw. attention_set_schedule(SCHEDULE_DRAWN) forces it.
inline constexpr int SCHEDULE_DRAWN = -3;
// The default without the tail table (causal_tail below): an A/B hook.
inline constexpr int SCHEDULE_NO_TAIL = -5;
inline constexpr int64_t DRAWN_SECTION_MIB = 32;
inline constexpr int64_t DRAWN_TILES_PER_HEAD_MIN = 33;
inline bool causal_draws(int64_t m_blocks) { return m_blocks >= DRAWN_TILES_PER_HEAD_MIN; }

// The K/V a d64 causal section may take when the model picks its size. At
// settled clocks (bench_attention's method) sections of 8-10 MiB ran fastest
// on grids whose K/V streams through L2: d64 causal 2k with 27 heads (13.5
// MiB) 1.6 % behind 16 heads (8 MiB), 1k with 60 heads (15 MiB) 0.5-1.7 %
// behind 33 (bench/NOTES-attention-log.md items 62-63; item 61's 64 MiB came from
// burst timing, where larger sections ran faster). Larger sections read K/V
// from DRAM more than once (ncu, 2k: 16 / 27 heads read 208 / 322 MB, one
// read of everything ~201 MB): a burst does not feel it, the power-bound
// sustained clocks do. Where every head's K/V fits in 16 MiB, L2 holds it
// whatever the sections, and the balance decides (small grids: 48-64 heads
// in one section ran 3-25 % faster than 8 MiB).
inline constexpr int64_t CAUSAL_SECTION_BUDGET_MIB_D64 = 10;
inline constexpr int64_t CAUSAL_RESIDENT_KV_MIB_D64 = 16;
// The K/V within which the launcher costs section sizes (kv_mib: all heads'
// K/V in MiB, rounded up, per query head as heads_within counts it; GQA's
// shared K/V is smaller): d64's budget, and at d128 the fallback's own 2 MiB (the
// model may only take fewer heads).
inline int64_t causal_budget_mib(int head_dim_bucket, int fallback_mib, int64_t kv_mib) {
  if (head_dim_bucket > 64) return fallback_mib;
  return kv_mib <= CAUSAL_RESIDENT_KV_MIB_D64 ? CAUSAL_RESIDENT_KV_MIB_D64 : CAUSAL_SECTION_BUDGET_MIB_D64;
}

// The causal grid the launcher costs (heads = batch * q_heads on `grid` CTAs,
// each head's K/V kv_head_bytes, counted per query head as heads_within does):
// the fallback's section and the model's budget from the rules above.
inline CausalGrid make_causal_grid(int64_t q_len, int64_t key_end, int64_t causal_offset, int64_t block_m,
                                   int64_t block_n, int64_t m_blocks, int64_t m_shift, int64_t heads, int64_t grid,
                                   int64_t kv_head_bytes, int head_dim_bucket) {
  const int fallback_mib = causal_fallback_mib(head_dim_bucket, m_blocks);
  const int64_t kv_mib = (kv_head_bytes * heads + (int64_t(1) << 20) - 1) >> 20;
  const int64_t budget_mib = causal_budget_mib(head_dim_bucket, fallback_mib, kv_mib);
  return CausalGrid{q_len, key_end, causal_offset, block_m, block_n, m_blocks, m_shift, heads, grid,
                    heads_within(budget_mib, kv_head_bytes, heads), heads_within(fallback_mib, kv_head_bytes, heads)};
}

// Grids of more rounds than this keep the fallback: one tile is then at most
// a few per cent of a CTA's work however the sections fall.
inline constexpr int64_t SECTION_MODEL_ROUNDS_MAX = 64;
// Sections whose longest CTA is within this of the shortest count as balanced.
inline constexpr double SECTION_BALANCE_TOLERANCE = 1.015;

// Sections of how many heads for a causal grid: the fallback where its
// longest CTA is within SECTION_BALANCE_TOLERANCE of the best, else, of the
// sizes that are, the one nearest half the grid (about two query blocks of
// each head in flight a round). Which sizes balance is erratic (d64 causal
// 1k, 16k tokens: 32 heads 4.9 % above the mean, 33 heads 1.3 %), so each
// one is costed. On the H100 (d64 causal, 16k tokens, 13 sizes timed), the
// model ranks the slow sizes, but sizes it calls balanced ran up to 10 %
// apart: sections of a few heads a round ran slower at 4k (many CTAs on one
// head's K/V), and a whole level a round (132 heads at 512) slower too; sizes
// near half the grid were within 1.3 % of the fastest at 512 to 4k in burst
// timing (bench/NOTES-attention-log.md item 61). At settled clocks larger
// sections ran slower (items 62-63): the launcher's budget.
inline int64_t causal_section_heads(const CausalGrid& g) {
  const int64_t most = std::min(g.max_section, g.heads);
  const int64_t fallback = std::clamp<int64_t>(g.fallback, 1, std::max<int64_t>(g.heads, 1));
  if (most <= 1 || g.grid <= 1 || g.m_blocks < 2 || g.heads * g.m_blocks > SECTION_MODEL_ROUNDS_MAX * g.grid)
    return fallback;
  std::vector<double> level_cost(size_t(g.m_blocks));
  for (int64_t j = 0; j < g.m_blocks; ++j) level_cost[size_t(j)] = causal_tile_cost(g, j);
  std::vector<double> span(size_t(most) + 1);
  double best = INFINITY;
  for (int64_t s = 1; s <= most; ++s) best = std::min(best, span[size_t(s)] = causal_makespan(g, s, level_cost));
  const double at_fallback = fallback <= most ? span[size_t(fallback)] : causal_makespan(g, fallback, level_cost);
  best = std::min(best, at_fallback);
  const double balanced = best * SECTION_BALANCE_TOLERANCE;
  if (at_fallback <= balanced) return fallback;
  const double half = 0.5 * double(g.grid);
  int64_t pick = fallback;
  double distance = INFINITY;
  for (int64_t s = 1; s <= most; ++s) {
    const double d = std::fabs(std::log(double(s) / half));
    if (span[size_t(s)] <= balanced && d < distance) pick = s, distance = d;
  }
  return pick;
}


// The static causal order's last rounds, rebalanced (persistent_tile's tail).
// The snake's whole rounds leave the CTAs that run one tile more than the rest
// (tiles % grid of them) a tile longer: 2048 tiles on 132 CTAs end at 16 / 15.52
// = 1.031 of the mean, as the per-CTA spans measured (1.037 at d128 causal 1k
// and 4k; bench/NOTES-attention-log.md item 103). Drawn tiles balance but cost
// more per tile than they save there; so the snake keeps the first rounds (an
// even count: they balance in pairs) and the launcher deals the rest, heaviest
// first, each to the CTA with the least work so far (LPT), in a table the
// kernel reads from its arguments (FlashArgs::tail_tiles: kernel parameters,
// which a CUDA graph keeps by value).
inline constexpr int TAIL_ENTRIES = 1024;     // rows x CTAs a table holds (132 CTAs: 7 rows)
inline constexpr uint16_t TAIL_NONE = 0xffff;  // no tile: the CTA's column has ended
inline constexpr int TAIL_ROUNDS = 2;          // whole rounds dealt beside the partial one
// A table that saves less of the modelled makespan is not used. At the power limit the
// clocks fall by much of what the balance saves (H200, bench/NOTES-attention-log.md item
// 104): grids the model gave 1.6-3.2 % ran level or 1 % slower, those it gave 5-20 % ran
// 1-12 % faster (1x96x1024 d64 causal +9-12 %, 1x40x2048 d128 +5-6 %).
inline constexpr double TAIL_GAIN_MIN = 0.05;

struct CausalTail {
  int64_t round = 0;            // rounds the snake runs first; 0: no table (the snake throughout)
  int64_t rows = 0;             // table rows: the longest column and its TAIL_NONE
  std::vector<uint16_t> tiles;  // rows x grid: CTA c's r-th tail tile at [r * grid + c]
  double makespan = 0.0, snake_makespan = 0.0;  // the longest CTA's work with and without it, in key blocks
};

// tile_head's query block for tile `tile` of a causal grid in sections of `section` heads.
inline int64_t section_tile_block(const CausalGrid& g, int64_t section, int64_t tile) {
  const int64_t per_section = section * g.m_blocks, s = tile / per_section;
  const int64_t heads = std::min(section, g.heads - s * section);
  return g.m_blocks - 1 - (tile - s * per_section) / heads;
}

// The tail table for a causal grid in sections of `section` heads, or none
// (round 0) where tile ids need more than 16 bits, the grid runs fewer than
// four rounds, the table would not fit TAIL_ENTRIES, or it saves under
// TAIL_GAIN_MIN of the makespan. Runs on the host at a grid's first launch
// (then cached): the snake's sums go by runs of tiles (for_each_snake_run),
// so only the dealt tiles are listed one by one (bench_attention's grids: ~30
// us on a CI core, against ~220 us tile by tile; tests/cpp checks both give one table).
inline CausalTail causal_tail(const CausalGrid& g, int64_t section) {
  CausalTail t;
  const int64_t tiles = g.heads * g.m_blocks, grid = g.grid;
  if (section < 1 || grid < 2 || tiles >= TAIL_NONE || tiles <= 2 * grid) return t;
  int64_t round = tiles / grid - TAIL_ROUNDS;
  round -= round & 1;
  if (round < 2) return t;
  // The snake's runs (for_each_snake_run) into difference arrays: the first `round` rounds
  // (`first`) and all (`snake`); the tiles from round `round` on one by one. Costs are whole
  // blocks plus TILE_FIXED_BLOCKS, so every sum is exact in any order.
  std::vector<double> level_cost(size_t(g.m_blocks));
  for (int64_t j = 0; j < g.m_blocks; ++j) level_cost[size_t(j)] = causal_tile_cost(g, j);
  std::vector<double> first(size_t(grid) + 1, 0.0), snake(size_t(grid) + 1, 0.0);
  std::vector<std::pair<double, int64_t>> rest;  // (cost, tile) from round `round` on, in tile order
  rest.reserve(size_t(tiles - round * grid));
  for_each_snake_run(g, section, level_cost, [&](int64_t it, int64_t lo, int64_t n, double cost, int64_t tile) {
    snake[size_t(lo)] += cost, snake[size_t(lo + n)] -= cost;
    if (it < round) {
      first[size_t(lo)] += cost, first[size_t(lo + n)] -= cost;
    } else {
      for (int64_t k = 0; k < n; ++k) rest.emplace_back(cost, tile + k);
    }
  });
  std::partial_sum(first.begin(), first.end(), first.begin());
  std::partial_sum(snake.begin(), snake.end(), snake.begin());
  t.snake_makespan = *std::max_element(snake.begin(), snake.end() - 1);
  // LPT: the dealt tiles heaviest first (tile order on ties), each to the CTA with the least
  // work so far (the lowest index on ties): a heap of (work, CTA).
  std::stable_sort(rest.begin(), rest.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  using Load = std::pair<double, int64_t>;
  std::vector<Load> heap(static_cast<size_t>(grid));
  for (int64_t c = 0; c < grid; ++c) heap[size_t(c)] = {first[size_t(c)], c};
  std::make_heap(heap.begin(), heap.end(), std::greater<Load>());
  std::vector<int64_t> owner(rest.size()), column_size(static_cast<size_t>(grid), 0);
  for (size_t i = 0; i < rest.size(); ++i) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Load>());
    heap.back().first += rest[i].first;
    owner[i] = heap.back().second;
    ++column_size[size_t(owner[i])];
    std::push_heap(heap.begin(), heap.end(), std::greater<Load>());
  }
  for (const Load& load : heap) t.makespan = std::max(t.makespan, load.first);
  const int64_t rows = *std::max_element(column_size.begin(), column_size.end()) + 1;
  if (rows * grid > TAIL_ENTRIES || t.makespan > t.snake_makespan * (1.0 - TAIL_GAIN_MIN)) return t;
  t.round = round;
  t.rows = rows;
  t.tiles.assign(size_t(rows * grid), TAIL_NONE);
  std::fill(column_size.begin(), column_size.end(), 0);  // now each column's next row
  for (size_t i = 0; i < rest.size(); ++i) {
    const size_t c = size_t(owner[i]);
    t.tiles[size_t(column_size[c]++) * size_t(grid) + c] = uint16_t(rest[i].second);
  }
  return t;
}

}  // namespace trt_fastops::attention
