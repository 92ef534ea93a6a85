// An interrupted write-package is not invisible. SIGINT/SIGTERM
// print one line saying what was interrupted and that rerunning the same
// command finishes it; inspect and verify on the directory it left name the
// partial files instead of "not a layer package"; the rerun finishes.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "skippy/package_layout.h"
#include "test_util.h"

extern char** environ;

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

TEST(InterruptedWrite, ASignalSaysHowToFinishAndInspectNamesThePartialFiles) {
  test::TempDir tmp;
  const fs::path model = tmp / "big.gguf";
  // Big enough (128 MiB) that the write is still running when it is signalled.
  const auto made = test::run_program(SKIPPY_MAKE_MODEL_PATH, {"--size", "128MiB", "--layers", "8", model.string()});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  // One directory per signal: a second run into a directory the first left
  // already finds the marker there, so waiting for it would not wait for the
  // second process to reach its write (and its signal handler).
  fs::path out;
  std::vector<std::string> args;
  // The handler ends the process with _exit while the write's threads run
  // (by design: the directory is resumable). ThreadSanitizer calls those
  // threads leaked and exits 66, so the child it runs is told not to.
  const char* tsan = std::getenv("TSAN_OPTIONS");
  std::vector<std::string> env_text =
      test::inherited_env_with({std::string("TSAN_OPTIONS=") + (tsan ? std::string(tsan) + ":" : "") + "report_thread_leaks=0"});
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (const int sig : {SIGTERM, SIGINT}) {
    out = tmp / ("pkg-" + std::to_string(sig));
    args = {SKIPPY_CLI_PATH, "write-package", model.string(), "--out-dir", out.string(), "--model-id",
            "org/Big-GGUF:Q8_0", "--source-revision", "0123abc", "--source-file", "big.gguf"};
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const fs::path err = tmp / "err.txt";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&fa);
    // Signalled once the write has begun (its marker is there) and some bytes are down.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!fs::exists(out / kInProgressMarker) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::kill(pid, sig);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "the write finished before the signal, or died of it silently";
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
    const std::string said = test::read_text(err);
    EXPECT_EQ(said, "write-package interrupted: " + out.string() +
                        " is not finished; rerun the same command to finish it (or delete the directory)\n");
    ASSERT_FALSE(fs::exists(out / "model-package.json"));
    for (const char* cmd : {"inspect", "verify"}) {
      const auto r = run_cli({cmd, out.string()});
      EXPECT_EQ(r.exit_code, 1) << cmd;
      EXPECT_NE(r.err.find(out.string() + ": an interrupted write-package left "), std::string::npos) << cmd << ": " << r.err;
      EXPECT_NE(r.err.find(" bytes); rerun it to finish, or delete the directory"), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("not a layer package"), std::string::npos) << r.err;
    }
  }
  std::vector<std::string> rerun(args.begin() + 1, args.end());
  const auto r = run_cli(rerun);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(run_cli({"verify", out.string()}).exit_code, 0);
  EXPECT_FALSE(fs::exists(out / kInProgressMarker));
}

}  // namespace
}  // namespace skippy
