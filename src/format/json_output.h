// JSON text for output: the one rule for printing a JSON document whose
// strings may come from outside (a GGUF's KVs, a Hub's error body, a path
// argument, a peer). JSON text must be UTF-8, and nlohmann::json refuses
// to print a string that is not (it throws while printing, which inside an
// error handler ends the process). Every byte sequence that is not UTF-8 is
// printed as U+FFFD instead, so a report with such a string still prints
// whole and parses; valid UTF-8 is printed as it is (control characters
// escaped, as JSON requires).
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace skippy {

// doc.dump(indent) with invalid UTF-8 replaced (indent -1: compact).
std::string json_output(const nlohmann::json& doc, int indent = -1);
std::string json_output(const nlohmann::ordered_json& doc, int indent = -1);

}  // namespace skippy
