#include "engine/tokenizer/tokenizer.h"

#include <iostream>
#include <string>

#include "engine/core/error.h"
#include "engine/tokenizer/chat_template.h"

namespace llmctl {

// Generic version: every special id goes into added_tokens_decoder with default flags.
// BpeTokenizer overrides it with the exact flags it knows.
nlohmann::json Tokenizer::to_hf_tokenizer_config(int64_t model_max_length) const {
  nlohmann::json cfg;
  nlohmann::json decoder = nlohmann::json::object();
  for (int id = 0; id < vocab_size(); ++id) {
    if (!is_special(id)) continue;
    decoder[std::to_string(id)] = {{"content", token_text(id)}, {"lstrip", false}, {"normalized", false},
                                   {"rstrip", false}, {"single_word", false}, {"special", true}};
  }
  auto tok = [&](int id) -> nlohmann::json { return id >= 0 ? nlohmann::json(token_text(id)) : nlohmann::json(); };
  cfg["add_bos_token"] = add_bos();
  cfg["add_eos_token"] = false;
  cfg["added_tokens_decoder"] = decoder;
  cfg["bos_token"] = tok(bos_id());
  cfg["eos_token"] = tok(eos_id());
  cfg["pad_token"] = tok(pad_id());
  cfg["clean_up_tokenization_spaces"] = false;
  if (!chat_template().empty()) cfg["chat_template"] = chat_template();
  if (model_max_length > 0) cfg["model_max_length"] = model_max_length;
  cfg["tokenizer_class"] = "PreTrainedTokenizerFast";
  return cfg;
}

void Tokenizer::set_chat_template(std::string source) {
  chat_template_ = std::move(source);
  compiled_chat_template_.reset();
  chat_template_error_.clear();
  if (chat_template_.empty()) return;
  try {
    compiled_chat_template_ = std::make_shared<const ChatTemplate>(chat_template_);
  } catch (const InputError& e) {
    chat_template_error_ = e.what();
    std::cerr << "llmctl: warning: the model's chat template does not parse; chat requests will fail: "
              << chat_template_error_ << "\n";
  }
}

const ChatTemplate& Tokenizer::compiled_chat_template() const {
  LLM_REQUIRE(chat_template_error_.empty()) << "this model's chat template is invalid: " << chat_template_error_;
  LLM_REQUIRE(compiled_chat_template_) << "this model has no chat template; use a plain prompt";
  return *compiled_chat_template_;
}

}  // namespace llmctl
