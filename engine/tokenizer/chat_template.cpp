#include "engine/tokenizer/chat_template.h"

#include "engine/tokenizer/jinja_eval.h"
#include "engine/tokenizer/jinja_parser.h"

namespace llmctl {

ChatTemplate::ChatTemplate(const std::string& source) : tmpl_(jinja::parse_template(source)) {}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  LLM_REQUIRE(context.is_object()) << "chat template context must be a JSON object";
  jinja::Interpreter interp;
  return interp.render(*tmpl_, jinja::from_json(context));
}

std::string render_chat_template_ordered(const std::string& source, const nlohmann::ordered_json& context) {
  return ChatTemplate(source).render(context);
}

std::string render_chat_template(const std::string& source, const nlohmann::json& context) {
  return ChatTemplate(source).render(nlohmann::ordered_json::parse(context.dump()));
}

}  // namespace llmctl
