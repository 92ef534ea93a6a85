// serve-artifacts' run until a stop signal (skippy/peer.h).
#include <pthread.h>
#include <signal.h>

#include <thread>

#include "skippy/peer.h"

namespace skippy::peer {

bool serve_until_signalled(const NodeIdentity& identity, ServerOptions options,
                           const std::function<void(const ArtifactServer&)>& on_listening) {
  // SIGINT/SIGTERM stop the server; SIGPIPE is never wanted.
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // inherited by every thread started below
  ArtifactServer server(identity, std::move(options));
  on_listening(server);
  std::thread waiter([&server, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    server.stop();
  });
  server.run();
  // run() returns only after stop(), which only the waiter calls, within
  // the shutdown grace whatever the I/O threads are doing.
  waiter.join();
  return server.drain();
}

}  // namespace skippy::peer
