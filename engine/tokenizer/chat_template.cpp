#include "engine/tokenizer/chat_template.h"

#include "engine/tokenizer/jinja/eval.h"
#include "engine/tokenizer/jinja/parser.h"

namespace llmctl {

ChatTemplate::ChatTemplate(const std::string& source) : tmpl_(jinja::parse_template(source)) {}

std::string ChatTemplate::render(const nlohmann::ordered_json& context, const RenderLimits& limits) const {
  LLM_REQUIRE(context.is_object()) << "chat template context must be a JSON object";
  jinja::Budget budget(limits);  // this render's limits, for everything below on this thread
  jinja::Value ctx;
  try {
    ctx = jinja::from_json(context);
  } catch (const jinja::TemplateError& e) {
    LLM_THROW() << "chat template context: " << e.what();
  }
  jinja::Interpreter interp;
  return interp.render(*tmpl_, ctx);
}

std::string render_chat_template_ordered(const std::string& source, const nlohmann::ordered_json& context,
                                         const RenderLimits& limits) {
  return ChatTemplate(source).render(context, limits);
}

std::string render_chat_template(const std::string& source, const nlohmann::json& context,
                                 const RenderLimits& limits) {
  return ChatTemplate(source).render(nlohmann::ordered_json::parse(context.dump()), limits);
}

}  // namespace llmctl
