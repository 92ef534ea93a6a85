// plan_memory(): weights + cache at a context against node budgets, and the
// bandwidth-optimal split among those that fit (skippy/plan.h).
#include "skippy/plan.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "cut_search.h"
#include "skippy/error.h"
#include "stage_weights.h"
#include "util/text.h"

namespace skippy {
namespace {

using plan_detail::checked_add;
using plan_detail::Ratio;
using plan_detail::u128;

[[noreturn]] void usage_error(const std::string& message) { throw Error(ErrorKind::kUsage, message); }

std::string bytes_text(uint64_t n) { return detail::bytes_and_human(n); }

// Everything one context needs: cache prefix sums over the layers.
struct CacheAt {
  std::vector<uint64_t> kv;     // kv[j] = KV bytes of layers 0..j-1
  std::vector<uint64_t> state;  // state[j] = recurrent state of layers 0..j-1
  CacheAt(const CacheShape& shape, uint64_t context) : kv(shape.layers.size() + 1, 0), state(shape.layers.size() + 1, 0) {
    for (size_t l = 0; l < shape.layers.size(); ++l) {
      const auto& s = shape.layers[l];
      const uint64_t bytes = layer_cache_bytes(s, context);
      kv[l + 1] = checked_add(kv[l], s.kind == LayerCacheKind::kRecurrent ? 0 : bytes);
      state[l + 1] = checked_add(state[l], s.kind == LayerCacheKind::kRecurrent ? bytes : 0);
    }
  }
};

struct Planner {
  const plan_detail::StageWeights& w;
  const MemoryPlanOptions& o;
  uint32_t N;
  std::vector<uint64_t> usable;  // budget - headroom, per stage (with budgets)

  uint64_t need(const CacheAt& c, uint32_t a, uint32_t b) const {
    const uint64_t cache = checked_add(c.kv[b] - c.kv[a], c.state[b] - c.state[a]);
    return checked_add(w.bytes(a, b), charged_cache_bytes(o.reserves, cache));
  }
  // The fill-balanced split: the smallest largest need / usable budget.
  std::vector<uint32_t> fill_cuts(const CacheAt& c) const {
    plan_detail::CutObjective obj;
    obj.score = [&](uint32_t i, uint32_t a, uint32_t b) {
      return std::optional<Ratio>(Ratio{need(c, a, b), o.budgets.empty() ? 1 : usable[i]});
    };
    obj.tiebreak = [&](uint32_t, uint32_t a, uint32_t b) {
      const uint64_t x = need(c, a, b);
      return u128{x} * x;
    };
    return *plan_detail::best_cuts(N, w.layers, obj);
  }
  bool fits(const CacheAt& c, const std::vector<uint32_t>& cuts) const {
    for (uint32_t i = 0; i < N; ++i) {
      if (need(c, cuts[i], cuts[i + 1]) > usable[i]) return false;
    }
    return true;
  }
  // The fastest split whose every stage fits: the smallest slowest stage
  // (weights / bandwidth), then the smallest sum of stage times.
  std::vector<uint32_t> bandwidth_cuts(const CacheAt& c) const {
    plan_detail::CutObjective obj;
    obj.score = [&](uint32_t i, uint32_t a, uint32_t b) -> std::optional<Ratio> {
      if (!o.budgets.empty() && need(c, a, b) > usable[i]) return std::nullopt;
      return Ratio{w.bytes(a, b), o.bandwidth[i]};
    };
    obj.tiebreak = [&](uint32_t i, uint32_t a, uint32_t b) {
      return u128{w.bytes(a, b)} * 1000000000000ull / o.bandwidth[i];  // picoseconds
    };
    return *plan_detail::best_cuts(N, w.layers, obj);
  }
};

// The smallest budget whose usable part (budget - headroom) holds `need`.
uint64_t budget_for(const MemoryReserves& r, uint64_t need) {
  uint64_t lo = need, hi = std::numeric_limits<uint64_t>::max();
  if (hi - headroom_bytes(r, hi) < need) return hi;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (mid - headroom_bytes(r, mid) >= need) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

}  // namespace

uint64_t headroom_bytes(const MemoryReserves& r, uint64_t budget) {
  const auto pct = static_cast<uint64_t>(u128{budget} * r.headroom_percent / 100);
  return std::max(pct, std::min(r.headroom_cap_bytes, budget / 2));
}

uint64_t charged_cache_bytes(const MemoryReserves& r, uint64_t cache) {
  const u128 den = 100 - r.compute_reserve_percent;
  const u128 v = (u128{cache} * 100 + den - 1) / den;
  if (v > std::numeric_limits<uint64_t>::max()) throw_invalid("plan: byte counts overflow 64 bits");
  return static_cast<uint64_t>(v);
}

uint64_t parse_bandwidth(std::string_view text) {
  std::string_view t = text;
  if (t.size() >= 2 && t[t.size() - 2] == '/' && std::tolower(static_cast<unsigned char>(t.back())) == 's') {
    t.remove_suffix(2);
  }
  const uint64_t v = parse_byte_size(t);
  if (v == 0) usage_error("invalid bandwidth \"" + std::string(text) + "\": must be more than 0 bytes per second");
  return v;
}

MemoryPlan plan_memory(const PackageCatalog& cat, const CacheShape& shape, const MemoryPlanOptions& o) {
  if (o.context == 0) usage_error("plan: the context must be at least 1 token");
  if (o.reserves.compute_reserve_percent >= 100) usage_error("plan: the compute reserve must be below 100%");
  if (o.reserves.headroom_percent > 100) usage_error("plan: the headroom cannot exceed 100% of a budget");
  if (!o.budgets.empty() && o.stages != 0 && o.stages != o.budgets.size()) {
    usage_error("plan: " + std::to_string(o.budgets.size()) + " budgets for " + std::to_string(o.stages) +
                " stages: give one budget per stage, in stage order");
  }
  const uint32_t N = o.budgets.empty() ? o.stages : static_cast<uint32_t>(o.budgets.size());
  if (N == 0) usage_error("plan: give the number of stages, or one budget per stage");
  if (!o.bandwidth.empty() && o.bandwidth.size() != N) {
    usage_error("plan: " + std::to_string(o.bandwidth.size()) + " bandwidths for " + std::to_string(N) +
                " stages: give one per stage, in stage order");
  }
  if (std::find(o.bandwidth.begin(), o.bandwidth.end(), uint64_t{0}) != o.bandwidth.end()) {
    usage_error("plan: a bandwidth must be more than 0 bytes per second");
  }
  if (shape.layers.size() != cat.layer_count) {
    throw_invalid("plan: the model metadata describes " + std::to_string(shape.layers.size()) +
                  " layers but the manifest declares " + std::to_string(cat.layer_count));
  }
  plan_detail::check_stage_count(cat.layer_count, N);
  const auto w = plan_detail::stage_weights(cat, o.final_stage_needs_embeddings, o.include_projector);
  Planner p{w, o, N, std::vector<uint64_t>(N, std::numeric_limits<uint64_t>::max())};
  for (uint32_t i = 0; i < o.budgets.size(); ++i) p.usable[i] = o.budgets[i] - headroom_bytes(o.reserves, o.budgets[i]);

  const CacheAt cache(shape, o.context);
  auto cuts = p.fill_cuts(cache);
  MemoryPlan plan;
  plan.layer_count = cat.layer_count;
  plan.context = o.context;
  plan.kv_type = shape.kv_type;
  plan.reserves = o.reserves;
  plan.notes = shape.notes;

  auto describe = [&](const CacheAt& c, uint32_t i, uint32_t a, uint32_t b) {
    MemoryPlannedStage s;
    s.index = i;
    s.range = {a, b};
    s.weight_bytes = w.bytes(a, b);
    s.kv_cache_bytes = c.kv[b] - c.kv[a];
    s.state_bytes = c.state[b] - c.state[a];
    s.charged_cache_bytes = charged_cache_bytes(o.reserves, checked_add(s.kv_cache_bytes, s.state_bytes));
    if (!o.budgets.empty()) {
      s.budget = o.budgets[i];
      s.headroom_bytes = headroom_bytes(o.reserves, o.budgets[i]);
    }
    s.memory_bytes = checked_add(checked_add(s.weight_bytes, s.charged_cache_bytes), s.headroom_bytes);
    s.embeddings = w.embeddings_on(a, b);
    s.output = w.output_on(b);
    if (!o.bandwidth.empty()) {
      s.bandwidth = o.bandwidth[i];
      s.decode_time_us = static_cast<double>(s.weight_bytes) / static_cast<double>(o.bandwidth[i]) * 1e6;
    }
    return s;
  };

  if (!o.budgets.empty() && !p.fits(cache, cuts)) {
    // The tightest stage of the least-full split, and what would fit instead.
    const MemoryPlannedStage* worst = nullptr;
    std::vector<MemoryPlannedStage> stages;
    for (uint32_t i = 0; i < N; ++i) stages.push_back(describe(cache, i, cuts[i], cuts[i + 1]));
    std::string layout;
    uint32_t over = 0;
    for (const auto& s : stages) {
      layout += (layout.empty() ? "" : ", ") + format_layer_range(s.range);
      if (s.memory_bytes > *s.budget) {
        ++over;
        if (!worst || plan_detail::less(Ratio{worst->memory_bytes, *worst->budget}, Ratio{s.memory_bytes, *s.budget})) worst = &s;
      }
    }
    std::string msg = "plan: no split into " + detail::counted(N, "stage") + " fits the budgets at a context of " +
                      std::to_string(o.context) + " tokens: in the least-full split (" + layout + ") " +
                      detail::counted(over, "stage") + (over == 1 ? " is" : " are") + " over; the tightest, stage " + std::to_string(worst->index) +
                      " (layers " + format_layer_range(worst->range) + "), needs " +
                      bytes_text(worst->memory_bytes - worst->headroom_bytes) + " itself (weights " +
                      std::to_string(worst->weight_bytes) + ", KV cache and state " +
                      std::to_string(worst->kv_cache_bytes + worst->state_bytes) + " charged as " +
                      std::to_string(worst->charged_cache_bytes) + ") and its budget keeps a headroom of " +
                      bytes_text(worst->headroom_bytes) + " free: " + bytes_text(worst->memory_bytes) +
                      " in all, over its budget of " + bytes_text(*worst->budget) + " by " +
                      bytes_text(worst->memory_bytes - *worst->budget) + ". ";
    msg += "The headroom grows with the budget (max(" + std::to_string(o.reserves.headroom_percent) +
           "% of it, min(" + std::to_string(o.reserves.headroom_cap_bytes) + " bytes, half of it))): stage " +
           std::to_string(worst->index) + " fits in a budget of " +
           bytes_text(budget_for(o.reserves, worst->memory_bytes - worst->headroom_bytes)) +
           (over > 1 ? " (and the other stages over budget need more too)" : "") + "; ";
    // The largest context at which these budgets fit (memory grows with it).
    auto fits_at = [&](uint64_t ctx) {
      const CacheAt c(shape, ctx);
      return p.fits(c, p.fill_cuts(c));
    };
    if (!fits_at(1)) {
      msg += "even a 1-token context does not fit: the weights alone are too large for these budgets.";
    } else {
      uint64_t lo = 1, hi = o.context - 1;  // fits(lo), the answer is in [lo, hi]
      while (lo < hi) {
        const uint64_t mid = lo + (hi - lo + 1) / 2;
        if (fits_at(mid)) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      msg += "these budgets fit a context of at most " + std::to_string(lo) + " tokens.";
    }
    throw_invalid(msg);
  }

  if (!o.bandwidth.empty()) cuts = p.bandwidth_cuts(cache);
  for (uint32_t i = 0; i < N; ++i) plan.stages.push_back(describe(cache, i, cuts[i], cuts[i + 1]));
  if (!o.bandwidth.empty()) {
    double slowest = 0, sum = 0;
    for (const auto& s : plan.stages) {
      slowest = std::max(slowest, *s.decode_time_us);
      sum += *s.decode_time_us;
    }
    plan.bottleneck_time_us = slowest;
    plan.decode_time_per_token_us = sum;
  }
  if (auto n = plan_detail::nextn_only_note(cat, plan.stages.back().range.start, cat.layer_count); !n.empty()) {
    plan.notes.push_back(n);
  }
  if (std::any_of(shape.layers.begin(), shape.layers.end(), [](const auto& l) { return l.kind == LayerCacheKind::kSlidingWindow; })) {
    plan.notes.push_back(
        "sliding-window layers are counted at min(context, window) tokens; llama.cpp allocates window + ubatch "
        "rounded up to 256 (with its default ubatch of 512, up to 768 tokens more per window layer)");
  }
  return plan;
}

}  // namespace skippy
