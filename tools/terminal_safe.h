// The CLI's stdout and stderr, terminal-safe (see terminal_safe.cpp): held
// for main's lifetime.
#pragma once

#include <memory>
#include <streambuf>

namespace skippy::cli {

class TerminalSafeOutput {
 public:
  TerminalSafeOutput();
  ~TerminalSafeOutput();
  TerminalSafeOutput(const TerminalSafeOutput&) = delete;
  TerminalSafeOutput& operator=(const TerminalSafeOutput&) = delete;

 private:
  std::streambuf* out_;
  std::streambuf* err_;
  std::unique_ptr<std::streambuf> out_filter_, err_filter_;
};

}  // namespace skippy::cli
