// Tokenizing untrusted text within a budget of tokens. Tokenizing costs memory in proportion to
// the text (pre-tokenized pieces and ids: ~35 bytes per byte of a 4 MB prompt), so a text that
// cannot fit is refused after tokenizing about `max_tokens` worth of it, not all of it: a text
// longer than one window is first counted window by window, each cut made before a whitespace
// byte that follows a non-whitespace one (a pre-token boundary for the regex pre-tokenizers, where
// the windows' counts add up exactly) or else at a UTF-8 boundary, with a slack per cut for the
// tokenizers whose tokens a cut can change. A text that passes is then tokenized whole, so the
// ids are always those of the text, never of its windows.
#pragma once
#include <cstddef>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace llmctl::server {

inline constexpr size_t kCountWindowBytes = size_t(64) << 10;

struct CappedTokens {
  std::vector<int> ids;  // every token of the text, when there are at most max_tokens; else empty
  bool over = false;     // more than max_tokens
  size_t count = 0;      // the number of tokens; when over and not exact, more than max_tokens is all that is known
  bool exact = true;
};

// The ids of `text` as tok.encode(text, parse_special) gives them, BOS first when `prompt_bos`
// and the tokenizer asks for one (as encode_prompt does), or `over` once more than `max_tokens`.
CappedTokens encode_capped(const Tokenizer& tok, std::string_view text, bool parse_special, bool prompt_bos,
                           size_t max_tokens, size_t window_bytes = kCountWindowBytes);

}  // namespace llmctl::server
