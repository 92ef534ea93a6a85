// plan_time(): the split with the least time per token (skippy/plan.h).
#include "skippy/plan.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "skippy/error.h"
#include "cut_search.h"
#include "stage_weights.h"

namespace skippy {
namespace {

using plan_detail::checked_add;
using plan_detail::u128;
constexpr uint64_t kInf = std::numeric_limits<uint64_t>::max();

[[noreturn]] void plan_usage(const std::string& message) { throw Error(ErrorKind::kUsage, message); }

uint64_t sat_add(uint64_t a, uint64_t b) { return a > kInf - b ? kInf : a + b; }
uint64_t sat128(u128 v) { return v > kInf ? kInf : static_cast<uint64_t>(v); }
// ceil(bytes / (bytes_per_second)) in nanoseconds.
uint64_t transfer_ns(uint64_t bytes, uint64_t per_second) {
  return sat128((u128{bytes} * 1'000'000'000u + per_second - 1) / per_second);
}

std::string ms(uint64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

std::string rate(uint64_t per_second) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f GB/s", static_cast<double>(per_second) / 1e9);
  return buf;
}

std::string node_list(const std::vector<uint32_t>& nodes) {
  std::string s;
  for (uint32_t n : nodes) s += (s.empty() ? "" : ", ") + std::to_string(n);
  return s;
}

enum class Objective { kSerial, kPeriod };

// A plan's score: the objective, then a tiebreak. The serial objective
// breaks ties by the period (the more balanced split); (sum, max) ordered
// lexicographically survives extension by another stage, so one DP pass is
// exact. The period objective needs a second pass (optimum()).
struct Score {
  uint64_t first = kInf;
  uint64_t second = kInf;
  bool operator<(const Score& o) const { return first != o.first ? first < o.first : second < o.second; }
};

// One node assignment: nodes[i] is the node of stage i, cuts[i] its first layer.
struct Assignment {
  std::vector<uint32_t> nodes;
  std::vector<uint32_t> cuts;  // cuts.size() == nodes.size() + 1
  Score score;
  bool found() const { return score.first != kInf; }
};

class Model {
 public:
  Model(const PackageCatalog& cat, const CacheShape& shape, const DecodeCost& cost, const TimePlanOptions& o)
      : w_(plan_detail::stage_weights(cat, o.final_stage_needs_embeddings, o.include_projector)),
        o_(o),
        L_(cat.layer_count),
        K_(static_cast<uint32_t>(o.bandwidth.size())) {
    active_.assign(size_t{L_} + 1, 0);
    kv_read_.assign(size_t{L_} + 1, 0);
    kv_.assign(size_t{L_} + 1, 0);
    state_.assign(size_t{L_} + 1, 0);
    for (uint32_t l = 0; l < L_; ++l) {
      const auto& s = shape.layers[l];
      const uint64_t cache = layer_cache_bytes(s, o.context);
      const bool recurrent = s.kind == LayerCacheKind::kRecurrent;
      kv_[l + 1] = checked_add(kv_[l], recurrent ? 0 : cache);
      state_[l + 1] = checked_add(state_[l], recurrent ? cache : 0);
      kv_read_[l + 1] = checked_add(kv_read_[l], cost.layers[l].nextn ? 0 : cache);
      active_[l + 1] = checked_add(active_[l], cost.layers[l].active_bytes);
    }
    global_ = cost.global_bytes;
    embd_row_ = cost.embedding_bytes_per_token;
    head_ = cost.output_bytes_per_token;
    for (uint32_t n = 0; n < K_; ++n) {
      usable_.push_back(o.budgets.empty() ? kInf : o.budgets[n] - headroom_bytes(o.reserves, o.budgets[n]));
      const NodeLink link = o.links.empty() ? NodeLink{} : o.links.size() == 1 ? o.links[0] : o.links[n];
      hop_.push_back(sat_add(link.latency_ns, link.bytes_per_second == 0 || o.activation_bytes_per_token == 0
                                                  ? 0
                                                  : transfer_ns(o.activation_bytes_per_token, link.bytes_per_second)));
    }
  }

  uint32_t layers() const { return L_; }
  uint32_t nodes() const { return K_; }
  uint64_t hop(uint32_t node) const { return hop_[node]; }

  uint64_t weight_bytes(uint32_t a, uint32_t b) const { return w_.bytes(a, b); }
  uint64_t active_bytes(uint32_t a, uint32_t b) const {
    uint64_t n = checked_add(global_, active_[b] - active_[a]);
    if (a == 0) n = checked_add(n, embd_row_);
    if (b == L_) n = checked_add(n, head_);
    return n;
  }
  uint64_t kv_read(uint32_t a, uint32_t b) const { return kv_read_[b] - kv_read_[a]; }
  uint64_t kv(uint32_t a, uint32_t b) const { return kv_[b] - kv_[a]; }
  uint64_t state(uint32_t a, uint32_t b) const { return state_[b] - state_[a]; }
  uint64_t need(uint32_t a, uint32_t b) const {
    return checked_add(weight_bytes(a, b), charged_cache_bytes(o_.reserves, checked_add(kv(a, b), state(a, b))));
  }
  bool fits(uint32_t node, uint32_t a, uint32_t b) const { return need(a, b) <= usable_[node]; }
  uint64_t stage_ns(uint32_t node, uint32_t a, uint32_t b) const {
    return sat_add(transfer_ns(checked_add(active_bytes(a, b), kv_read(a, b)), o_.bandwidth[node]), o_.stage_overhead_ns);
  }

  // The best assignment: every node used in order (allow_skip false), or any
  // ordered subset with `forced` (if set) among them. `cap` bounds every
  // stage's time plus hop (the second pass of the period objective).
  Assignment best(Objective obj, bool allow_skip, std::optional<uint32_t> forced, uint64_t cap = kInf) const {
    const size_t W = size_t{L_} + 1;
    std::vector<Score> f((size_t{K_} + 1) * W);
    std::vector<int64_t> from((size_t{K_} + 1) * W, -2);  // -1: node skipped; b: node took [b, a)
    f[0] = {0, 0};
    for (uint32_t j = 1; j <= K_; ++j) {
      const uint32_t node = j - 1;
      const bool skippable = allow_skip && forced != node;
      for (uint32_t a = 0; a <= L_; ++a) {
        Score bestv;
        int64_t bestb = -2;
        if (skippable && f[(j - 1) * W + a].first != kInf) {
          bestv = f[(j - 1) * W + a];
          bestb = -1;
        }
        for (uint32_t b = 0; b < a; ++b) {
          const Score prev = f[(j - 1) * W + b];
          if (prev.first == kInf || !fits(node, b, a)) continue;
          const uint64_t step = sat_add(stage_ns(node, b, a), hop_[node]);
          if (step > cap) continue;
          const Score v = obj == Objective::kSerial ? Score{sat_add(prev.first, step), std::max(prev.second, step)}
                                                    : Score{std::max(prev.first, step), 0};
          if (v < bestv) {
            bestv = v;
            bestb = b;
          }
        }
        f[j * W + a] = bestv;
        from[j * W + a] = bestb;
      }
    }
    Assignment out;
    // A single stage has no hop: each allowed node alone.
    for (uint32_t n = 0; n < K_; ++n) {
      if (!allow_skip && K_ != 1) break;
      if (forced && *forced != n) continue;
      if (!fits(n, 0, L_)) continue;
      const uint64_t v = stage_ns(n, 0, L_);
      const Score sc = obj == Objective::kSerial ? Score{v, v} : Score{v, 0};
      if (v <= cap && sc < out.score) out = {{n}, {0, L_}, sc};
    }
    if (f[size_t{K_} * W + L_] < out.score) {
      Assignment a;
      a.score = f[size_t{K_} * W + L_];
      uint32_t at = L_;
      for (uint32_t j = K_; j >= 1 && at > 0; --j) {
        const int64_t b = from[j * W + at];
        if (b == -1) continue;
        a.nodes.push_back(j - 1);
        a.cuts.push_back(at);
        at = static_cast<uint32_t>(b);
      }
      a.cuts.push_back(0);
      std::reverse(a.nodes.begin(), a.nodes.end());
      std::reverse(a.cuts.begin(), a.cuts.end());
      out = std::move(a);
    }
    return out;
  }

  // The objective's best: the period objective takes the smallest period,
  // then the smallest serial time among plans with that period.
  Assignment optimum(Objective obj, bool allow_skip, std::optional<uint32_t> forced = {}) const {
    Assignment a = best(obj, allow_skip, forced);
    if (obj == Objective::kPeriod && a.found()) a = best(Objective::kSerial, allow_skip, forced, a.score.first);
    return a;
  }

 private:
  plan_detail::StageWeights w_;  // what a stage loads (plan_stages' bytes)
  const TimePlanOptions& o_;
  uint32_t L_, K_;
  std::vector<uint64_t> active_, kv_read_, kv_, state_, usable_, hop_;
  uint64_t global_ = 0, embd_row_ = 0, head_ = 0;
};

void describe(const Model& model, const TimePlanOptions& o, const Assignment& a, TimePlan& plan) {
  const size_t k = a.nodes.size();
  plan.stages.clear();
  uint64_t serial = 0, period = 0;
  for (size_t i = 0; i < k; ++i) {
    TimedStage s;
    s.index = static_cast<uint32_t>(i);
    s.node = a.nodes[i];
    s.range = {a.cuts[i], a.cuts[i + 1]};
    const uint32_t lo = s.range.start, hi = s.range.end;
    s.weight_bytes = model.weight_bytes(lo, hi);
    s.active_weight_bytes = model.active_bytes(lo, hi);
    s.kv_read_bytes = model.kv_read(lo, hi);
    s.kv_cache_bytes = model.kv(lo, hi);
    s.state_bytes = model.state(lo, hi);
    s.charged_cache_bytes = charged_cache_bytes(o.reserves, checked_add(s.kv_cache_bytes, s.state_bytes));
    if (!o.budgets.empty()) s.budget = o.budgets[s.node];
    s.headroom_bytes = s.budget ? headroom_bytes(o.reserves, *s.budget) : 0;
    s.memory_bytes = checked_add(checked_add(s.weight_bytes, s.charged_cache_bytes), s.headroom_bytes);
    s.bandwidth = o.bandwidth[s.node];
    s.stage_time_ns = model.stage_ns(s.node, lo, hi);
    s.hop_time_ns = k > 1 ? model.hop(s.node) : 0;
    s.embeddings = lo == 0 || (o.final_stage_needs_embeddings && hi == model.layers());
    s.output = hi == model.layers();
    serial = sat_add(serial, sat_add(s.stage_time_ns, s.hop_time_ns));
    period = std::max(period, sat_add(s.stage_time_ns, s.hop_time_ns));
    plan.stages.push_back(s);
  }
  plan.serial_time_ns = serial;
  plan.period_ns = period;
  plan.time_per_token_ns = o.lanes <= 1 ? serial : std::max(serial, sat128(u128{period} * o.lanes));
  plan.tokens_per_second = plan.time_per_token_ns == 0 ? 0 : 1e9 * o.lanes / static_cast<double>(plan.time_per_token_ns);
}

void check_options(const PackageCatalog& m, const CacheShape& shape, const DecodeCost& cost, const TimePlanOptions& o) {
  if (o.context == 0) plan_usage("plan: the context must be at least 1 token");
  if (o.bandwidth.empty()) plan_usage("plan: give one bandwidth per node");
  const size_t K = o.bandwidth.size();
  if (std::find(o.bandwidth.begin(), o.bandwidth.end(), uint64_t{0}) != o.bandwidth.end()) {
    plan_usage("plan: a bandwidth must be more than 0 bytes per second");
  }
  if (!o.budgets.empty() && o.budgets.size() != K) {
    plan_usage("plan: " + std::to_string(o.budgets.size()) + " budgets for " + std::to_string(K) +
                " nodes: give one per node, in stage order");
  }
  if (o.links.size() > 1 && o.links.size() != K) {
    plan_usage("plan: " + std::to_string(o.links.size()) + " links for " + std::to_string(K) +
                " nodes: give one link per node (its hop to the next stage), or one for all");
  }
  if (o.lanes == 0) plan_usage("plan: --lanes must be at least 1");
  if (o.reserves.compute_reserve_percent >= 100) plan_usage("plan: the compute reserve must be below 100%");
  if (m.layer_count == 0) throw_invalid("plan: the package has no layers");
  if (!o.auto_stages && K > m.layer_count) {
    throw_invalid("plan: cannot split " + std::to_string(m.layer_count) + " layers over " + std::to_string(K) +
                  " nodes: every stage needs at least one layer (use --stages auto, or fewer nodes)");
  }
  if (shape.layers.size() != m.layer_count || cost.layers.size() != m.layer_count) {
    throw_invalid("plan: the model metadata describes " + std::to_string(shape.layers.size()) +
                  " layers and its tensors " + std::to_string(cost.layers.size()) + ", but the manifest declares " +
                  std::to_string(m.layer_count));
  }
}

}  // namespace

TimePlanOptions time_plan_options(const MemoryPlanOptions& memory) {
  TimePlanOptions o;
  o.context = memory.context;
  o.bandwidth = memory.bandwidth;
  o.budgets = memory.budgets;
  o.reserves = memory.reserves;
  o.final_stage_needs_embeddings = memory.final_stage_needs_embeddings;
  o.include_projector = memory.include_projector;
  return o;
}

uint64_t parse_duration_ns(std::string_view text) {
  std::string_view t = text;
  double scale = 0;
  for (const auto& [suffix, s] : {std::pair{"ns", 1.0}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}}) {
    const std::string_view sv(suffix);
    if (t.size() > sv.size() && t.substr(t.size() - sv.size()) == sv) {
      t.remove_suffix(sv.size());
      scale = s;
      break;
    }
  }
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (scale == 0 || ec != std::errc{} || end != t.data() + t.size() || !std::isfinite(v) || v < 0 || v * scale > 1e18) {
    plan_usage("invalid duration \"" + std::string(text) + "\": a number with ns, us, ms or s (13ms, 1.3ms, 250us)");
  }
  return static_cast<uint64_t>(std::llround(v * scale));
}

NodeLink parse_node_link(std::string_view text) {
  NodeLink link;
  const auto at = text.find('@');
  link.latency_ns = parse_duration_ns(text.substr(0, at));
  if (at != std::string_view::npos) link.bytes_per_second = parse_bandwidth(text.substr(at + 1));
  return link;
}

TimePlan plan_time(const PackageCatalog& m, const CacheShape& shape, const DecodeCost& cost, const TimePlanOptions& o) {
  check_options(m, shape, cost, o);
  const Model model(m, shape, cost, o);
  const Objective obj = o.lanes > 1 ? Objective::kPeriod : Objective::kSerial;
  const Assignment chosen = model.optimum(obj, o.auto_stages);
  if (!chosen.found()) {
    // plan_memory says exactly what does not fit (the tightest stage, bytes short, the context that would).
    MemoryPlanOptions mo;
    mo.context = o.context;
    mo.budgets = o.budgets;
    mo.reserves = o.reserves;
    mo.final_stage_needs_embeddings = o.final_stage_needs_embeddings;
    mo.include_projector = o.include_projector;
    if (o.budgets.size() <= m.layer_count) (void)plan_memory(m, shape, mo);
    throw_invalid("plan: no split over these nodes fits their budgets at a context of " + std::to_string(o.context) +
                  " tokens");
  }
  TimePlan plan;
  plan.layer_count = m.layer_count;
  plan.context = o.context;
  plan.lanes = o.lanes;
  plan.notes = cost.notes;
  describe(model, o, chosen, plan);
  const auto better = [&](const TimePlan& a, const TimePlan& b) { return a.time_per_token_ns < b.time_per_token_ns; };

  if (o.auto_stages) {
    for (uint32_t n = 0; n < model.nodes(); ++n) {
      if (std::find(chosen.nodes.begin(), chosen.nodes.end(), n) != chosen.nodes.end()) continue;
      const Assignment with = model.optimum(obj, true, n);
      if (!with.found()) {
        plan.left_out.push_back({n, "no split that uses it fits the budgets"});
        continue;
      }
      TimePlan alt;
      describe(model, o, with, alt);
      const std::string more = ms(alt.time_per_token_ns - std::min(alt.time_per_token_ns, plan.time_per_token_ns));
      if (with.nodes.size() == 1) {
        plan.left_out.push_back({n, "on its own (" + rate(o.bandwidth[n]) + ") it takes " + ms(alt.time_per_token_ns) +
                                        " per token, " + more + " more, and any split that adds it pays a hop"});
      } else {
        plan.left_out.push_back({n, "the best split that uses it (nodes " + node_list(with.nodes) + ") takes " +
                                        ms(alt.time_per_token_ns) + " per token, " + more + " more: its hop (" +
                                        ms(model.hop(n)) + ") and stage overhead cost more than its bandwidth (" +
                                        rate(o.bandwidth[n]) + ") saves"});
      }
    }
  }
  if (m.layer_count > 0 && !plan.stages.empty()) {
    if (auto n = plan_detail::nextn_only_note(m, plan.stages.back().range.start, m.layer_count); !n.empty()) {
      plan.notes.push_back(n);
    }
  }
  if (o.activation_bytes_per_token == 0 && std::any_of(o.links.begin(), o.links.end(), [](const NodeLink& l) { return l.bytes_per_second; })) {
    plan.notes.push_back("the activation width is unknown: hops are charged their latency only");
  }

  if (!o.target_ns) return plan;
  plan.target_ns = o.target_ns;
  plan.target_met = plan.time_per_token_ns <= *o.target_ns;
  if (*plan.target_met) return plan;
  const uint64_t target = *o.target_ns;
  // Fewer nodes.
  if (!o.auto_stages && model.nodes() > 1) {
    const Assignment fewer = model.optimum(obj, true);
    TimePlan alt;
    describe(model, o, fewer, alt);
    if (fewer.nodes.size() < model.nodes() && better(alt, plan)) {
      plan.suggestions.push_back(std::string(alt.time_per_token_ns <= target ? "meets the target: " : "closer: ") +
                                 "fewer stages (--stages auto): nodes " + node_list(fewer.nodes) + " only, " +
                                 ms(alt.time_per_token_ns) + " per token");
    }
  }
  // The fixed costs alone.
  const size_t k = plan.stages.size();
  uint64_t fixed = 0;
  for (const auto& s : plan.stages) fixed = sat_add(fixed, sat_add(o.stage_overhead_ns, s.hop_time_ns));
  if (o.lanes <= 1 && fixed >= target) {
    plan.suggestions.push_back("the " + std::to_string(k) + " stage overhead(s) and hop(s) alone take " + ms(fixed) +
                               ": no bandwidth meets " + ms(target) + " with " + std::to_string(k) + " stages");
  } else {
    // A faster node: the slowest stage's node, everything else unchanged.
    const auto slow = std::max_element(plan.stages.begin(), plan.stages.end(), [](const auto& a, const auto& b) {
      return a.stage_time_ns + a.hop_time_ns < b.stage_time_ns + b.hop_time_ns;
    });
    const uint64_t others = plan.serial_time_ns - (slow->stage_time_ns + slow->hop_time_ns);
    const uint64_t room = o.lanes <= 1 ? (target > others ? target - others : 0) : target / o.lanes;
    const uint64_t over = sat_add(o.stage_overhead_ns, slow->hop_time_ns);
    if (room > over && (o.lanes <= 1 || plan.serial_time_ns - slow->stage_time_ns < target)) {
      const uint64_t bytes = checked_add(slow->active_weight_bytes, slow->kv_read_bytes);
      const uint64_t need = sat128((u128{bytes} * 1'000'000'000u + (room - over) - 1) / (room - over));
      plan.suggestions.push_back("a faster node for stage " + std::to_string(slow->index) + " (node " +
                                 std::to_string(slow->node) + ", layers " + format_layer_range(slow->range) +
                                 "): at least " + rate(need) + " instead of " + rate(slow->bandwidth));
    }
  }
  // A shorter context (time grows with the context: binary search).
  auto time_at = [&](uint64_t ctx) -> uint64_t {
    TimePlanOptions c = o;
    c.context = ctx;
    c.target_ns.reset();
    const Model mc(m, shape, cost, c);
    const Assignment a = mc.optimum(obj, o.auto_stages);
    if (!a.found()) return kInf;
    TimePlan t;
    describe(mc, c, a, t);
    return t.time_per_token_ns;
  };
  if (o.context > 1 && time_at(1) <= target) {
    uint64_t lo = 1, hi = o.context - 1;
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo + 1) / 2;
      if (time_at(mid) <= target) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    plan.suggestions.push_back("a shorter context: at most " + std::to_string(lo) + " tokens meets " + ms(target));
  } else {
    plan.suggestions.push_back("no shorter context meets " + ms(target) + ": the weights alone take longer");
  }
  return plan;
}

}  // namespace skippy
