#include "skippy/plan.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "skippy/error.h"

namespace skippy {
namespace {

__extension__ using u128 = unsigned __int128;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

[[noreturn]] void usage(const std::string& message) { throw Error(ErrorKind::kUsage, message); }

uint64_t add(uint64_t a, uint64_t b) {
  if (a > kMax - b) throw_invalid("plan: byte counts overflow 64 bits");
  return a + b;
}

uint64_t mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > kMax / a) throw_invalid("plan: byte counts overflow 64 bits");
  return a * b;
}

// bytes / cap as an exact fraction; cap == 0 is an infinite ratio for any
// bytes > 0 (less() below never divides).
struct Ratio {
  uint64_t num = 0;
  uint64_t den = 1;
};
// a < b, exactly (128-bit cross products).
bool less(Ratio a, Ratio b) { return u128{a.num} * b.den < u128{b.num} * a.den; }
Ratio max_of(Ratio a, Ratio b) { return less(a, b) ? b : a; }

u128 sat_add(u128 a, u128 b) {
  const u128 m = ~u128{0};
  return a > m - b ? m : a + b;
}

// Everything the planner needs, derived once from the manifest and options.
struct Model {
  uint32_t L = 0;  // layers
  uint32_t N = 0;  // stages
  std::vector<uint64_t> prefix;  // prefix[j] = bytes of layers 0..j-1
  std::vector<uint64_t> fixed;   // per stage: shared bytes it loads
  std::vector<uint64_t> cap;     // per stage: the ratio denominator (1 without node budgets)
  uint64_t bytes(uint32_t stage, uint32_t a, uint32_t b) const { return fixed[stage] + (prefix[b] - prefix[a]); }
  Ratio ratio(uint32_t stage, uint32_t a, uint32_t b) const { return {bytes(stage, a, b), cap[stage]}; }
  // Stage i may cover a..b when the stages before and after it can have >= 1 layer each.
  uint32_t lo(uint32_t stage) const { return stage; }              // smallest start
  uint32_t hi(uint32_t stage) const { return L - (N - 1 - stage); }  // largest end
};

// cuts[i] = start of stage i (cuts[0] = 0), cuts[N] = L.
std::vector<uint32_t> balance(const Model& md) {
  const uint32_t N = md.N, L = md.L;
  const size_t W = size_t{L} + 1;
  // Phase 1: best[i][j] = the smallest achievable largest ratio of stages
  // 0..i covering layers 0..j-1.
  std::vector<Ratio> best(size_t{N} * W);
  auto at = [W](std::vector<Ratio>& v, uint32_t i, uint32_t j) -> Ratio& { return v[size_t{i} * W + j]; };
  for (uint32_t j = 1; j <= md.hi(0); ++j) at(best, 0, j) = md.ratio(0, 0, j);
  for (uint32_t i = 1; i < N; ++i) {
    for (uint32_t j = i + 1; j <= md.hi(i); ++j) {
      Ratio b{1, 0};  // infinity
      for (uint32_t k = md.lo(i); k < j; ++k) {
        const Ratio r = max_of(at(best, i - 1, k), md.ratio(i, k, j));
        if (less(r, b)) b = r;
      }
      at(best, i, j) = b;
    }
  }
  const Ratio bottleneck = at(best, N - 1, L);
  auto fits = [&](uint32_t i, uint32_t a, uint32_t b) { return !less(bottleneck, md.ratio(i, a, b)); };

  // Phase 2: among plans whose every stage is within the bottleneck, the
  // smallest sum of squared stage bytes; ties keep the earliest cut.
  const u128 kInf = ~u128{0};
  std::vector<u128> cost(size_t{N} * W, kInf);
  std::vector<uint32_t> from(size_t{N} * W, 0);
  auto sq = [](uint64_t x) { return u128{x} * x; };
  for (uint32_t j = 1; j <= md.hi(0); ++j) {
    if (fits(0, 0, j)) cost[j] = sq(md.bytes(0, 0, j));
  }
  for (uint32_t i = 1; i < N; ++i) {
    for (uint32_t j = i + 1; j <= md.hi(i); ++j) {
      u128 b = kInf;
      uint32_t arg = 0;
      for (uint32_t k = md.lo(i); k < j; ++k) {
        const u128 prev = cost[size_t{i - 1} * W + k];
        if (prev == kInf || !fits(i, k, j)) continue;
        const u128 c = sat_add(prev, sq(md.bytes(i, k, j)));
        if (arg == 0 || c < b) {
          b = c;
          arg = k;
        }
      }
      if (arg != 0) {
        cost[size_t{i} * W + j] = b;
        from[size_t{i} * W + j] = arg;
      }
    }
  }
  std::vector<uint32_t> cuts(size_t{N} + 1);
  cuts[N] = L;
  for (uint32_t i = N - 1; i > 0; --i) cuts[i] = from[size_t{i} * W + cuts[i + 1]];
  cuts[0] = 0;
  return cuts;
}

std::string composition(const PlannedStage& s) {
  std::string out = "metadata";
  if (s.embeddings) out += s.index == 0 ? " + embeddings" : " + embeddings (tied output)";
  if (s.projector) out += " + projector";
  out += " + " + std::string(s.range.size() == 1 ? "layer " + std::to_string(s.range.start)
                                                  : "layers " + format_layer_range(s.range));
  if (s.output) out += " + output";
  return out;
}

}  // namespace

Plan plan_stages(const PackageManifest& m, const PlanOptions& o) {
  const uint32_t L = m.layer_count;
  const uint32_t N = o.stages;
  if (N == 0) usage("plan: the number of stages must be at least 1");
  if (o.activation_bytes_per_value != 2 && o.activation_bytes_per_value != 4) {
    usage("plan: activation bytes per value must be 2 (f16) or 4 (f32), not " +
          std::to_string(o.activation_bytes_per_value));
  }
  if (o.max_bytes_per_stage && !o.node_budgets.empty()) {
    usage("plan: give either one budget for every stage or one budget per stage, not both");
  }
  if (!o.node_budgets.empty() && o.node_budgets.size() != N) {
    usage("plan: " + std::to_string(o.node_budgets.size()) + " budgets for " + std::to_string(N) +
          " stages: give one budget per stage, in stage order");
  }
  if (L == 0) throw_invalid("plan: the package has no layers");
  if (N > L) {
    throw_invalid("plan: cannot split " + std::to_string(L) + " layers into " + std::to_string(N) +
                  " stages: every stage needs at least one layer (use --stages 1.." + std::to_string(L) + ")");
  }
  if (m.layers.size() != L) {
    throw_invalid("plan: the manifest declares " + std::to_string(L) + " layers but lists " +
                  std::to_string(m.layers.size()));
  }

  const bool tied = o.final_stage_needs_embeddings;
  const ProjectorEntry* projector = nullptr;
  if (o.include_projector) {
    for (const auto& p : m.projectors) {
      if (p.kind == kProjectorKindMmproj) {
        projector = &p;
        break;
      }
    }
  }

  Model md;
  md.L = L;
  md.N = N;
  md.prefix.assign(size_t{L} + 1, 0);
  for (uint32_t l = 0; l < L; ++l) {
    if (m.layers[l].layer_index != l) {
      throw_invalid("plan: layers[" + std::to_string(l) + "] has layer_index " +
                    std::to_string(m.layers[l].layer_index) + " (layers must be 0.." + std::to_string(L) + " in order)");
    }
    md.prefix[l + 1] = add(md.prefix[l], m.layers[l].artifact_bytes);
  }
  md.fixed.assign(N, m.shared.metadata.artifact_bytes);
  md.fixed[0] = add(md.fixed[0], m.shared.embeddings.artifact_bytes);
  if (projector) md.fixed[0] = add(md.fixed[0], projector->artifact_bytes);
  md.fixed[N - 1] = add(md.fixed[N - 1], m.shared.output.artifact_bytes);
  if (tied && N > 1) md.fixed[N - 1] = add(md.fixed[N - 1], m.shared.embeddings.artifact_bytes);
  // Every stage's bytes, and their sum, must fit 64 bits: check the total once.
  uint64_t total = md.prefix[L];
  for (uint64_t f : md.fixed) total = add(total, f);
  md.cap.assign(N, 1);
  std::vector<std::optional<uint64_t>> budget(N);
  for (uint32_t i = 0; i < N; ++i) {
    if (!o.node_budgets.empty()) {
      budget[i] = o.node_budgets[i];
      md.cap[i] = o.node_budgets[i];
    } else if (o.max_bytes_per_stage) {
      budget[i] = *o.max_bytes_per_stage;
    }
  }

  Plan plan;
  plan.layer_count = L;
  plan.activation_width = m.activation_width ? m.activation_width : o.activation_width;
  plan.activation_bytes_per_value = o.activation_bytes_per_value;
  plan.output_tied_to_embeddings = tied;
  if (plan.activation_width) {
    plan.activation_frame_bytes_per_token = mul(*plan.activation_width, o.activation_bytes_per_value);
  } else {
    plan.notes.push_back("the manifest has no activation_width: the activation frame per token is unknown");
  }
  if (tied && N > 1) {
    plan.notes.push_back("the output projection is tied to the token embeddings: the final stage also loads " +
                         m.shared.embeddings.path);
  }
  if (projector) {
    plan.notes.push_back("stage 0 counts projector " + projector->path + " (" +
                         std::to_string(projector->artifact_bytes) + " bytes)");
  } else if (!m.projectors.empty() && !o.include_projector) {
    plan.notes.push_back("projectors are not counted (stage 0 loads one for multimodal serving)");
  } else if (o.include_projector) {
    plan.notes.push_back("the package declares no mmproj projector: none counted");
  }

  auto describe = [&](uint32_t i, uint32_t a, uint32_t b) {
    PlannedStage s;
    s.index = i;
    s.range = {a, b};
    s.layer_bytes = md.prefix[b] - md.prefix[a];
    s.shared_bytes = md.fixed[i];
    s.bytes = md.bytes(i, a, b);
    s.embeddings = i == 0 || (tied && i == N - 1);
    s.output = i == N - 1;
    s.projector = i == 0 && projector != nullptr;
    s.budget = budget[i];
    return s;
  };

  // A budget one stage cannot meet even with its smallest possible range.
  if (o.max_bytes_per_stage || !o.node_budgets.empty()) {
    for (uint32_t i = 0; i < N; ++i) {
      uint32_t a = 0, b = L;  // N == 1: the only stage holds every layer
      if (N > 1 && i == 0) {
        b = 1;
      } else if (N > 1 && i == N - 1) {
        a = L - 1;
      } else if (N > 1) {  // a middle stage: its lightest possible single layer
        a = md.lo(i);
        for (uint32_t l = md.lo(i); l < md.hi(i); ++l) {
          if (m.layers[l].artifact_bytes < m.layers[a].artifact_bytes) a = l;
        }
        b = a + 1;
      }
      const auto s = describe(i, a, b);
      if (s.bytes > *s.budget) {
        throw_invalid("plan: stage " + std::to_string(i) + " cannot fit its budget: even its smallest possible range (" +
                      composition(s) + ") needs " + std::to_string(s.bytes) + " bytes > budget " +
                      std::to_string(*s.budget) + " bytes (over by " + std::to_string(s.bytes - *s.budget) + ")");
      }
    }
    // Together: every stage's shared parts plus every layer, against the sum of budgets.
    u128 budget_sum = 0;
    for (const auto& b : budget) budget_sum += *b;
    if (u128{total} > budget_sum) {
      throw_invalid("plan: " + std::to_string(N) + " stages need " + std::to_string(total) +
                    " bytes in total (metadata on every stage, embeddings, output and all layers) but the budgets add up to " +
                    std::to_string(static_cast<uint64_t>(budget_sum)) + " bytes (short by " +
                    std::to_string(static_cast<uint64_t>(u128{total} - budget_sum)) + ")");
    }
  }

  const auto cuts = balance(md);
  for (uint32_t i = 0; i < N; ++i) {
    auto s = describe(i, cuts[i], cuts[i + 1]);
    if (i + 1 < N) s.activation_out_bytes_per_token = plan.activation_frame_bytes_per_token;
    plan.total_bytes += s.bytes;
    plan.max_stage_bytes = std::max(plan.max_stage_bytes, s.bytes);
    plan.stages.push_back(s);
  }

  // The best plan still over budget: name its worst stage.
  const PlannedStage* worst = nullptr;
  for (const auto& s : plan.stages) {
    if (s.budget && s.bytes > *s.budget) {
      if (!worst || less(Ratio{worst->bytes, *worst->budget}, Ratio{s.bytes, *s.budget})) worst = &s;
    }
  }
  if (worst) {
    std::string layout;
    for (const auto& s : plan.stages) {
      layout += (layout.empty() ? "" : ", ") + format_layer_range(s.range) + " = " + std::to_string(s.bytes);
    }
    throw_invalid("plan: no split into " + std::to_string(N) + " stages fits the budgets: in the best one (" + layout +
                  " bytes) stage " + std::to_string(worst->index) + " (layers " + format_layer_range(worst->range) +
                  ") needs " + std::to_string(worst->bytes) + " bytes > budget " + std::to_string(*worst->budget) +
                  " bytes (over by " + std::to_string(worst->bytes - *worst->budget) + ")");
  }
  return plan;
}

uint64_t parse_byte_size(std::string_view text) {
  const std::string shown(text);
  auto bad = [&](const std::string& why) -> uint64_t {
    usage("invalid size \"" + shown + "\": " + why +
          " (write bytes, or a number with K/M/G/T = 1024^n, KiB/MiB/GiB/TiB, or KB/MB/GB/TB = 1000^n)");
  };
  size_t i = 0;
  uint64_t whole = 0;
  size_t digits = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits) {
    const auto d = static_cast<uint64_t>(text[i] - '0');
    if (whole > (kMax - d) / 10) return bad("too large");
    whole = whole * 10 + d;
  }
  if (digits == 0) return bad("expected a number");
  // Fraction: keep up to 18 digits (enough for any unit up to 2^64).
  uint64_t frac = 0, frac_scale = 1;
  bool has_frac = false;
  if (i < text.size() && text[i] == '.') {
    has_frac = true;
    ++i;
    size_t fd = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++fd) {
      if (fd < 18) {
        frac = frac * 10 + static_cast<uint64_t>(text[i] - '0');
        frac_scale *= 10;
      }
    }
    if (fd == 0) return bad("expected digits after '.'");
  }
  std::string unit;
  for (; i < text.size(); ++i) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  uint64_t mult = 0;
  if (unit.empty() || unit == "b") {
    mult = 1;
  } else {
    static constexpr std::string_view kPrefixes = "kmgt";
    const auto p = kPrefixes.find(unit[0]);
    const std::string rest = unit.substr(1);
    if (p == std::string_view::npos || !(rest.empty() || rest == "b" || rest == "ib")) return bad("unknown unit");
    const uint64_t base = rest == "b" ? 1000 : 1024;
    mult = 1;
    for (size_t k = 0; k <= p; ++k) mult *= base;
  }
  if (has_frac && mult == 1) return bad("a fraction of a byte");
  if (mult != 1 && whole > kMax / mult) return bad("too large");
  const uint64_t base_bytes = whole * mult;
  const auto extra = static_cast<uint64_t>(u128{frac} * mult / frac_scale);
  if (base_bytes > kMax - extra) return bad("too large");
  return base_bytes + extra;
}

}  // namespace skippy
