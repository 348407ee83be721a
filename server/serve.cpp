#include "server/serve.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <thread>

namespace llmctl::server {

namespace {
sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
}  // namespace

void block_shutdown_signals() {
  const sigset_t set = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int run_server(Executor& executor, const Tokenizer& tok, const EngineConfig& engine_config, const ServerConfig& config) {
  // Signals go to one waiting thread; every thread started from here inherits the blocked mask.
  block_shutdown_signals();
  const sigset_t set = shutdown_signals();
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a signal

  Engine engine(executor, tok, engine_config);
  HttpServer server(engine, tok, executor.config(), config);
  server.bind();
  std::fprintf(stderr, "llmctl serve: listening on http://%s:%d (model '%s', %d KV blocks, max %d concurrent requests)\n",
               config.host.c_str(), server.port(), config.served_model_name.c_str(), engine.num_blocks(),
               config.max_concurrent_requests);
  std::fprintf(stderr, "llmctl serve: %s\n", engine.describe_kv_cache().c_str());
  std::atomic<bool> waiting{true};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&set, &sig);
    waiting = false;
    if (sig == SIGINT || sig == SIGTERM) {
      std::fprintf(stderr, "llmctl serve: %s received, finishing in-flight requests\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
      server.stop();
    }
  });
  server.serve();
  // serve() also returns when listening fails after bind: wake the waiter so it can be joined.
  if (waiting) pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  server.stop();
  std::fprintf(stderr, "llmctl serve: stopped\n");
  return 0;
}

}  // namespace llmctl::server
