// The rosters of skippy/runtime_lines.h's table (split_rosters.cpp: data only).
#pragma once

#include "skippy/runtime_lines.h"

namespace skippy::rosters {
extern const SplitRoster kUpstream;
extern const SplitRoster kFork;
}  // namespace skippy::rosters
