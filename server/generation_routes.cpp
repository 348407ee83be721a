// The generation routes of HttpServer: OpenAI completions / chat and TGI generate, whole or
// streamed as Server-Sent Events.
#include <chrono>
#include <functional>

#include "engine/core/utf8.h"
#include "engine/structured/constraint_fields.h"
#include "server/api_error.h"
#include "server/http_server.h"
#include "server/http/http_types.h"
#include "server/request_log.h"
#include "server/sse.h"
#include "server/tgi_api.h"
#include "server/tools/tool_constraint.h"

namespace llmctl::server {

namespace {
using json = nlohmann::json;

// Counts a generation or tokenize request against --max-concurrent-requests while it lives.
class Slot {
 public:
  explicit Slot(std::atomic<int>& n) : n_(n) {}
  ~Slot() { --n_; }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;

 private:
  std::atomic<int>& n_;
};

// A stream in progress: the job, how its events become SSE chunks, and what is left.
struct Stream {
  std::shared_ptr<Job> job;
  std::shared_ptr<void> slot;
  std::function<std::vector<json>(const JobEvent&)> chunks;  // delta -> chunk objects
  std::function<std::vector<json>()> closing;                 // after the last prompt finished
  bool openai_done_marker = true;                             // write `data: [DONE]` at the end
  size_t remaining = 0;                                       // prompts not finished
  bool ended = false;
  std::function<void()> wake_loop;
  std::function<int64_t()> completion_tokens;
};

// Drives one stream: called by the HTTP layer until the stream ends or the client is gone.
bool stream_step(Stream& s, http::StreamSink& sink) {
  auto fail = [&] {  // the client is gone: abort the job wherever it is
    s.job->cancel();
    s.wake_loop();
    current_request().note = "client disconnected";
    return false;
  };
  if (s.ended) return false;
  JobEvent e;
  if (!s.job->next(e, 0.5)) {
    // Nothing to send: an SSE comment line, which clients ignore, finds a closed connection.
    const std::string ping = ": ping\n\n";
    return sink.write(ping) ? true : fail();
  }
  std::string out;
  if (e.kind == JobEvent::delta) {
    for (const json& c : s.chunks(e)) out += sse_event(c);
  } else if (e.kind == JobEvent::finished) {
    if (--s.remaining == 0) {
      for (const json& c : s.closing()) out += sse_event(c);
      if (s.openai_done_marker) out += sse_done();
      s.ended = true;
    }
  } else if (e.kind == JobEvent::failed) {
    out += sse_event(error_body(e.status, e.message));
    if (s.openai_done_marker) out += sse_done();
    current_request().note = e.message;
    s.ended = true;
  }
  current_request().completion_tokens = s.completion_tokens();
  // Its place among --max-concurrent-requests is free before the client reads the last event: a client
  // that sends its next request on seeing [DONE] must not find it still taken (the HTTP worker lets
  // go of the stream only after the write returns, later under load).
  if (s.ended) s.slot.reset();
  if (!out.empty() && !sink.write(out)) return fail();
  if (s.ended) sink.done();
  return true;
}

void start_sse(HttpResponse& res, const std::shared_ptr<Stream>& st) {
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_stream(
      "text/event-stream", [st](http::StreamSink& sink) { return stream_step(*st, sink); },
      [st](bool) {
        if (!st->ended) {
          st->job->cancel();
          st->wake_loop();
        }
      });
}
}  // namespace

// A place among --max-concurrent-requests, held while the returned object lives; 429 beyond.
std::shared_ptr<void> HttpServer::acquire_slot(HttpResponse& res) {
  if (++in_flight_ > cfg_.max_concurrent_requests) {
    --in_flight_;
    res.set_header("Retry-After", "1");
    throw ApiError(429, "the server is at its limit of " + std::to_string(cfg_.max_concurrent_requests) +
                            " concurrent requests; retry later");
  }
  return std::make_shared<Slot>(in_flight_);
}

// Non-streamed answers: the next event of the job, aborting the job if the client hangs up while
// it waits (then ApiError 499, which no client will read, for the log).
static JobEvent next_or_gone(Job& job, const HttpRequest& req, const std::function<void()>& wake_loop) {
  JobEvent e;
  for (;;) {
    const bool got = job.next(e, 0.5);
    if (req.client_gone()) {  // one poll() per event or half second
      job.cancel();
      wake_loop();
      current_request().note = "client disconnected";
      throw ApiError(499, "the client closed the connection");
    }
    if (got) return e;
  }
}

RenderLimits HttpServer::render_limits(std::chrono::steady_clock::time_point start) const {
  RenderLimits r;
  if (cfg_.request_timeout_s > 0)
    r.deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(cfg_.request_timeout_s));
  r.cancel = &stopping_;  // shutdown stops a render in progress
  return r;
}

std::shared_ptr<Job> HttpServer::start_job(std::vector<std::vector<int>> prompts, const SamplingParams& params,
                                           std::chrono::steady_clock::time_point start) {
  JobEvent e;
  // --request-timeout counts from the request's start: templating and tokenizing took their share.
  double timeout = cfg_.request_timeout_s;
  if (timeout > 0)
    timeout = std::max(1e-3, timeout - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  auto job = loop_.submit(std::move(prompts), params, timeout);
  while (!job->next(e, 1.0)) {
  }
  if (e.kind == JobEvent::rejected) throw ApiError(e.status, e.message);
  return job;
}

// The request field a constraint error names: "response_format" for "response_format.json_schema.schema".
static std::string top_field(const std::string& field) { return field.substr(0, field.find_first_of(".[")); }

// A request's constraint fields, parsed; their errors are 400s naming `param`.
static std::optional<ConstraintSpec> parse_constraint(const std::function<std::optional<ConstraintSpec>()>& parse,
                                                      const std::string& param) {
  try {
    return parse();
  } catch (const InputError& e) {
    throw ApiError(400, e.what(), param);
  }
}

// The first constraint field of an OpenAI body (what its errors name).
static std::string constraint_param(const json& body) {
  if (body.is_object())
    for (const auto& [k, v] : body.items())
      if (is_constraint_field(k) && !v.is_null()) return k;
  return "response_format";
}

void HttpServer::constrain(SamplingParams& params, const std::optional<ConstraintSpec>& spec) {
  if (!spec) return;
  try {
    params.constraint = grammars_->compile(*spec);
  } catch (const InputError& e) {
    throw ApiError(400, e.what(), top_field(spec->field));
  }
}

void HttpServer::handle_openai(OpenAiApi api, const HttpRequest& req, HttpResponse& res) {
  const auto start = std::chrono::steady_clock::now();
  auto slot = acquire_slot(res);  // before the body is parsed and the chat template runs: their work counts
  const json body = parse_json_body(req);
  auto oreq =
      std::make_shared<OpenAiRequest>(parse_openai_request(api, body, tok_, limits_, render_limits(start), req.body));
  auto spec = parse_constraint([&] { return constraint_from_request_text(body, req.body); }, constraint_param(body));
  if (oreq->parses_tools()) {
    // tool_choice required or named, or auto once a call opens: the calls follow the tools' schemas.
    // A response_format beside it constrains the text instead (under auto), or conflicts.
    if (auto tools = tool_call_constraint(*oreq->tool_format, *oreq->tools, limits_.tool_trigger_special)) {
      if (!spec) spec = std::move(tools);
      else if (oreq->tools->choice != ToolChoice::automatic)
        throw ApiError(400, "tool_choice \"required\" or a named function cannot be combined with " + constraint_param(body),
                       "tool_choice");
    }
  }
  constrain(oreq->params, spec);
  auto responder = std::make_shared<OpenAiResponder>(*oreq, tok_, cfg_.served_model_name);
  current_request().id = responder->id();
  current_request().prompt_tokens = responder->prompt_tokens();
  auto job = start_job(oreq->prompts, oreq->params, start);
  if (!oreq->stream) {
    size_t remaining = oreq->prompts.size();
    while (remaining) {
      const JobEvent e = next_or_gone(*job, req, [this] { loop_.notify(); });
      if (e.kind == JobEvent::failed) throw ApiError(e.status, e.message);
      if (e.kind == JobEvent::finished) {
        responder->add(e);
        --remaining;
      }
    }
    current_request().completion_tokens = responder->completion_tokens();
    res.set_content(json_text(responder->response()), "application/json");
    return;
  }
  auto st = std::make_shared<Stream>();
  st->job = job;
  st->slot = slot;
  st->remaining = oreq->prompts.size();
  st->chunks = [oreq, responder](const JobEvent& e) { return responder->chunks(e); };
  st->closing = [oreq, responder] {
    std::vector<json> v;
    if (auto u = responder->usage_chunk()) v.push_back(*u);
    return v;
  };
  st->wake_loop = [this] { loop_.notify(); };
  st->completion_tokens = [responder] { return responder->completion_tokens(); };
  start_sse(res, st);
}

void HttpServer::handle_tgi(bool stream, const HttpRequest& req, HttpResponse& res) {
  const auto start = std::chrono::steady_clock::now();
  auto slot = acquire_slot(res);
  json body = parse_json_body(req);
  if (body.is_object() && body.contains("stream") && body["stream"].is_boolean()) stream = stream || body["stream"].get<bool>();
  auto treq = std::make_shared<TgiRequest>(parse_tgi_request(body, tok_, limits_));
  constrain(treq->params, parse_constraint([&] { return constraint_from_tgi_text(body, req.body); }, "grammar"));
  current_request().prompt_tokens = int64_t(treq->prompt.size());
  auto job = start_job({treq->prompt}, treq->params, start);
  if (!stream) {
    JobEvent e;
    for (;;) {
      e = next_or_gone(*job, req, [this] { loop_.notify(); });
      if (e.kind == JobEvent::failed) throw ApiError(e.status, e.message);
      if (e.kind == JobEvent::finished) break;
    }
    current_request().completion_tokens = int64_t(e.result->outputs.at(0).token_ids.size());
    res.set_content(json_text(tgi_response(*treq, *e.result, tok_)), "application/json");
    return;
  }
  auto streamer = std::make_shared<TgiStreamer>(*treq, tok_);
  auto st = std::make_shared<Stream>();
  st->job = job;
  st->slot = slot;
  st->remaining = 1;
  st->openai_done_marker = false;
  st->chunks = [treq, streamer](const JobEvent& e) { return streamer->events(e); };
  st->closing = [] { return std::vector<json>{}; };
  st->wake_loop = [this] { loop_.notify(); };
  st->completion_tokens = [streamer] { return streamer->generated_tokens(); };
  start_sse(res, st);
}

}  // namespace llmctl::server
