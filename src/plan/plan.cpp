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

using plan_detail::less;
using plan_detail::Ratio;
using plan_detail::u128;

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

[[noreturn]] void usage(const std::string& message) { throw Error(ErrorKind::kUsage, message); }

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

Plan plan_stages(const PackageCatalog& cat, const PlanOptions& o) {
  const uint32_t L = cat.layer_count;
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
  if (N >= 2 && N <= L && !o.final_stage_needs_embeddings) {
    usage("plan: whether the final stage loads the embeddings (a tied output) is not in the catalog: plan the "
          "opened package (plan_stages(package, options) on plan_package's PlanPackage), or set "
          "final_stage_needs_embeddings");
  }
  const bool tied = o.final_stage_needs_embeddings.value_or(false);
  plan_detail::check_stage_count(L, N);
  const auto md = plan_detail::stage_weights(cat, tied, o.include_projector);
  const CatalogArtifact* projector = md.projector_artifact;
  const uint64_t total = plan_detail::total_bytes(md, N);
  std::vector<uint64_t> cap(N, 1);  // the ratio denominators (1 without node budgets)
  std::vector<std::optional<uint64_t>> budget(N);
  for (uint32_t i = 0; i < N; ++i) {
    if (!o.node_budgets.empty()) {
      budget[i] = o.node_budgets[i];
      cap[i] = o.node_budgets[i];
    } else if (o.max_bytes_per_stage) {
      budget[i] = *o.max_bytes_per_stage;
    }
  }

  Plan plan;
  plan.layer_count = L;
  plan.activation_width = cat.activation_width ? cat.activation_width : o.activation_width;
  plan.activation_bytes_per_value = o.activation_bytes_per_value;
  plan.output_tied_to_embeddings = tied;
  if (plan.activation_width) {
    plan.activation_frame_bytes_per_token = plan_detail::checked_mul(*plan.activation_width, o.activation_bytes_per_value);
  } else {
    plan.notes.push_back("the manifest has no activation_width: the activation frame per token is unknown");
  }
  if (tied && N > 1) {
    plan.notes.push_back("the output projection is tied to the token embeddings: the final stage also loads " +
                         md.embeddings_label);
  }
  if (projector) {
    plan.notes.push_back("stage 0 counts projector " + projector->path + " (" + std::to_string(projector->bytes) +
                         " bytes)");
  } else if (md.has_projectors && !o.include_projector) {
    plan.notes.push_back("projectors are not counted (stage 0 loads one for multimodal serving)");
  } else if (o.include_projector) {
    plan.notes.push_back("the package declares no mmproj projector: none counted");
  }

  auto describe = [&](uint32_t i, uint32_t a, uint32_t b) {
    PlannedStage s;
    s.index = i;
    s.range = {a, b};
    s.layer_bytes = md.layer_bytes(a, b);
    s.shared_bytes = md.shared_bytes(a, b);
    s.bytes = md.bytes(a, b);
    s.embeddings = md.embeddings_on(a, b);
    s.output = md.output_on(b);
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
        a = i;
        for (uint32_t l = i; l < L - (N - 1 - i); ++l) {
          if (md.layer_bytes(l, l + 1) < md.layer_bytes(a, a + 1)) a = l;
        }
        b = a + 1;
      }
      const auto s = describe(i, a, b);
      if (s.bytes > *s.budget) {
        throw_invalid("plan: stage " + std::to_string(i) + " cannot fit its budget: even its smallest possible range (" +
                      composition(s) + ") needs " + detail::bytes_and_human(s.bytes) + " > budget " +
                      detail::bytes_and_human(*s.budget) + " (over by " +
                      detail::bytes_and_human(s.bytes - *s.budget) + ")");
      }
    }
    // Together: every stage's shared parts plus every layer, against the sum of budgets.
    u128 budget_sum = 0;
    for (const auto& b : budget) budget_sum += *b;
    if (u128{total} > budget_sum) {
      throw_invalid("plan: " + detail::counted(N, "stage") + (N == 1 ? " needs " : " need ") +
                    detail::bytes_and_human(total) +
                    " in total (metadata on every stage, embeddings, output and all layers) but the budgets add up to " +
                    detail::bytes_and_human(static_cast<uint64_t>(budget_sum)) + " (short by " +
                    detail::bytes_and_human(static_cast<uint64_t>(u128{total} - budget_sum)) + ")");
    }
  }

  plan_detail::CutObjective objective;
  objective.score = [&](uint32_t i, uint32_t a, uint32_t b) { return std::optional<Ratio>(Ratio{md.bytes(a, b), cap[i]}); };
  objective.tiebreak = [&](uint32_t, uint32_t a, uint32_t b) {
    const uint64_t x = md.bytes(a, b);
    return u128{x} * x;  // spreads the rest evenly
  };
  const auto cuts = *plan_detail::best_cuts(N, L, objective);
  for (uint32_t i = 0; i < N; ++i) {
    auto s = describe(i, cuts[i], cuts[i + 1]);
    if (i + 1 < N) s.activation_out_bytes_per_token = plan.activation_frame_bytes_per_token;
    plan.total_bytes += s.bytes;
    plan.max_stage_bytes = std::max(plan.max_stage_bytes, s.bytes);
    plan.stages.push_back(s);
  }

  if (auto n = plan_detail::nextn_only_note(cat, plan.stages.back().range.start, L); !n.empty()) plan.notes.push_back(n);

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
    throw_invalid("plan: no split into " + detail::counted(N, "stage") + " fits the budgets: in the best one (" + layout +
                  " bytes) stage " + std::to_string(worst->index) + " (layers " + format_layer_range(worst->range) +
                  ") needs " + detail::bytes_and_human(worst->bytes) + " > budget " +
                  detail::bytes_and_human(*worst->budget) + " (over by " +
                  detail::bytes_and_human(worst->bytes - *worst->budget) + ")");
  }
  if (md.extents) {
    plan.notes.push_back("package schema 2: stage bytes are the tensor bytes a stage reads (carrier, its layers' "
                         "tensors, the boundary tensors), not whole artifacts");
  }
  return plan;
}


}  // namespace skippy
