// GPT-2 byte-level alphabet: every byte is written as one printable Unicode character, so that
// byte-level BPE vocabularies are plain strings ("Ġthe" is " the"). Plus small UTF-8 helpers.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace llmctl {

// The character (as UTF-8) that stands for byte b.
const std::string& byte_to_unicode(uint8_t b);
// Byte-level spelling of raw bytes: "\x20the" -> "Ġthe".
std::string bytes_to_unicode_text(std::string_view bytes);
// Inverse: false (out untouched) when `text` has a character outside the byte alphabet.
bool unicode_text_to_bytes(std::string_view text, std::string& out);

// Decodes the code point at s[pos]; returns its length in bytes (>= 1). Invalid or truncated
// sequences give cp = 0xFFFFFFFF and length 1.
size_t utf8_decode(std::string_view s, size_t pos, uint32_t& cp);
void utf8_append(std::string& out, uint32_t cp);
// Unicode White_Space (what Rust's char::is_whitespace tests).
bool is_unicode_whitespace(uint32_t cp);

}  // namespace llmctl
