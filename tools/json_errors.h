// docs/CLI.md: "any command with --json that fails: {"error": {"kind": "…",
// "message": "…"}} on stdout". The newer commands run their body through
// this; main() still prints the message on stderr and picks the exit code.
#pragma once

#include <iostream>
#include <string>

#include "cli.h"
#include "skippy/error.h"

namespace skippy::cli {

inline std::string error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::kInvalidInput: return "invalid_input";
    case ErrorKind::kIo: return "io";
    case ErrorKind::kNotFound: return "not_found";
    case ErrorKind::kUsage: return "usage";
  }
  return "error";
}

// Runs `body`; when `json` and it throws a skippy::Error, prints the error
// document on stdout, then rethrows.
template <typename Body>
int run_with_json_errors(bool json, Body&& body) {
  try {
    return body();
  } catch (const Error& e) {
    if (json) print_json({{"error", {{"kind", error_kind_name(e.kind())}, {"message", e.what()}}}});
    throw;
  }
}

}  // namespace skippy::cli
