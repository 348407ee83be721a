#include "engine/tokenizer/tokenizer.h"

#include <string>

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

}  // namespace llmctl
