// The sidecars of a stage admission as JSON, in the one form both the
// descriptor (stage_admission_json) and the full message
// (stage_admission_message_json) print. Internal.
#pragma once

#include <nlohmann/json.hpp>

#include "skippy/stage_admission.h"

namespace skippy::detail {

nlohmann::ordered_json admission_sidecars_json(const StageAdmission& a);

}  // namespace skippy::detail
