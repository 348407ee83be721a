#include "server/token_budget.h"

namespace llmctl::server {

namespace {
// Tokens a cut may add or remove (a split word, a dummy-prefix space, a special token such as
// <|im_start|> cut in two and spelled out in byte tokens): windows are counted against max_tokens
// plus this much per cut, so a text that fits is never refused. A 64 KiB window holds thousands of
// tokens, so the slack hardly delays the refusal of a text that does not fit.
constexpr size_t kSlack = 8, kSlackPerCut = 32;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// The end of the window that starts at `from`: `from + window` moved back to before a whitespace
// byte that follows a non-whitespace one (looking back half a window at most), else to a UTF-8
// code point boundary.
size_t cut_point(std::string_view text, size_t from, size_t window) {
  const size_t want = from + window;
  if (want >= text.size()) return text.size();
  for (size_t i = want; i > from + window / 2; --i)
    if (is_space(text[i]) && !is_space(text[i - 1])) return i;
  size_t i = want;
  while (i > from + 1 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return i;
}
}  // namespace

CappedTokens encode_capped(const Tokenizer& tok, std::string_view text, bool parse_special, bool prompt_bos,
                           size_t max_tokens, size_t window_bytes) {
  CappedTokens r;
  const bool bos = prompt_bos && tok.add_bos() && tok.bos_id() >= 0;
  if (window_bytes > 0 && text.size() > window_bytes) {
    size_t count = bos ? 1 : 0, cuts = 0;
    for (size_t pos = 0; pos < text.size();) {
      const size_t end = cut_point(text, pos, window_bytes);
      count += tok.encode(text.substr(pos, end - pos), parse_special).size();
      if (end < text.size()) ++cuts;
      pos = end;
      const size_t slack = kSlack + kSlackPerCut * cuts;
      if (count > max_tokens && count - max_tokens > slack) {
        r.over = true;
        r.exact = false;
        r.count = count - slack;
        return r;
      }
    }
  }
  std::vector<int> ids;
  if (bos) ids.push_back(tok.bos_id());
  std::vector<int> body = tok.encode(text, parse_special);
  if (ids.empty())
    ids = std::move(body);
  else
    ids.insert(ids.end(), body.begin(), body.end());
  r.count = ids.size();
  if (ids.size() > max_tokens)
    r.over = true;
  else
    r.ids = std::move(ids);
  return r;
}

}  // namespace llmctl::server
