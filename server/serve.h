// `llmctl serve` end to end: an Engine on the loaded model, the HTTP server, and SIGINT/SIGTERM
// handling (stop accepting, end in-flight streams with a final event, return 0).
#pragma once
#include "engine/engine.h"
#include "server/http_server.h"

namespace llmctl::server {

// Blocks SIGINT and SIGTERM in the calling thread, so that every thread started afterwards (the
// CPU backend's pool included) leaves them to run_server's waiting thread. Call it first.
void block_shutdown_signals();

// Blocks until a signal arrives; returns the exit code.
int run_server(Executor& executor, const Tokenizer& tok, const EngineConfig& engine_config, const ServerConfig& config);

}  // namespace llmctl::server
