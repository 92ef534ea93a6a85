// What the CLI writes to stdout and stderr passes through one filter that
// escapes terminal control code points (C0 but newline and tab, DEL, C1,
// Unicode bidirectional controls: skippy/control_chars.h's control_at) as \uXXXX, so no
// string from a package, a GGUF, a file name or a peer can drive the
// terminal (clear the screen, set the title, reorder what a person reads).
// JSON output stays valid: outside strings it has no such code point, and
// inside one \uXXXX is JSON's own escape.
#include "terminal_safe.h"

#include <cstdio>
#include <iostream>
#include <string>

#include "util/control_chars.h"

namespace skippy::cli {
namespace {

class TerminalSafeBuf : public std::streambuf {
 public:
  explicit TerminalSafeBuf(std::streambuf* dest) : dest_(dest) {}
  ~TerminalSafeBuf() override {
    drain(/*final=*/true);
    dest_->pubsync();
  }

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    pending_.push_back(static_cast<char>(ch));
    drain(false);
    return ch;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    for (std::streamsize i = 0; i < n; ++i) {
      pending_.push_back(s[i]);
      drain(false);
    }
    return n;
  }
  int sync() override {
    drain(false);
    return dest_->pubsync();
  }

 private:
  // Emits what is decided; keeps a possible control's first bytes until the
  // rest arrives (or, `final`, emits them as they are).
  void drain(bool final) {
    while (!pending_.empty()) {
      if (!final && control_prefix_pending(pending_)) return;
      const size_t n = control_at(pending_, 0);
      if (n > 0) {
        const std::string esc = escape_control(std::string_view(pending_).substr(0, n));
        dest_->sputn(esc.data(), static_cast<std::streamsize>(esc.size()));
        pending_.erase(0, n);
      } else {
        dest_->sputc(pending_[0]);
        pending_.erase(0, 1);
      }
    }
  }

  std::streambuf* dest_;
  std::string pending_;
};

}  // namespace

TerminalSafeOutput::TerminalSafeOutput()
    : out_(std::cout.rdbuf()), err_(std::cerr.rdbuf()),
      out_filter_(std::make_unique<TerminalSafeBuf>(out_)), err_filter_(std::make_unique<TerminalSafeBuf>(err_)) {
  std::cout.rdbuf(out_filter_.get());
  std::cerr.rdbuf(err_filter_.get());
}

TerminalSafeOutput::~TerminalSafeOutput() {
  std::cout.flush();
  std::cerr.flush();
  std::cout.rdbuf(out_);
  std::cerr.rdbuf(err_);
}

}  // namespace skippy::cli
