// The rosters of skippy/abi.h's table (split_rosters.cpp: data only).
#pragma once

#include "skippy/abi.h"

namespace skippy::rosters {
extern const SplitRoster kUpstream;
extern const SplitRoster kFork;
}  // namespace skippy::rosters
