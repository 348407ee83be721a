// Chat templates: a small Jinja interpreter covering what HF chat templates use, rendering
// exactly as Python jinja2 does for the same context. Templates come with model files, so they
// are untrusted: parsing and rendering are bounded (RenderLimits, engine/tokenizer/jinja/limits.h)
// and fail with InputError instead of crashing, hanging or exhausting memory.
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/jinja/limits.h"

namespace llmctl {

// Renders `source` (Jinja) with `context`, e.g. {"messages": [...], "add_generation_prompt": true,
// "bos_token": "<s>", "eos_token": "</s>"}. Throws InputError on syntax errors (with line), on
// raise_exception() called by the template and when a limit is exceeded.
std::string render_chat_template(const std::string& source, const nlohmann::json& context,
                                 const RenderLimits& limits = {});

// Same, keeping the key order of the context's objects (nlohmann::json sorts keys), which shows
// wherever the template prints a dict, e.g. `tools | tojson`. Python keeps insertion order.
std::string render_chat_template_ordered(const std::string& source, const nlohmann::ordered_json& context,
                                         const RenderLimits& limits = {});

namespace jinja {
struct Template;
}

// A template parsed once and rendered many times (the server renders one per request).
// Construction throws InputError on syntax errors; render() is const and thread-safe.
class ChatTemplate {
 public:
  explicit ChatTemplate(const std::string& source);
  std::string render(const nlohmann::ordered_json& context, const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const jinja::Template> tmpl_;
};

}  // namespace llmctl
