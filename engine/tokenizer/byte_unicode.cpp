#include "engine/tokenizer/byte_unicode.h"

#include <array>
#include <unordered_map>

namespace llmctl {
namespace {

// Printable Latin-1 bytes keep their code point; the other 68 bytes (controls, space, 0x7f-0xa0,
// soft hyphen) are moved to U+0100.. in byte order, as GPT-2's encoder.py defines it.
struct ByteAlphabet {
  std::array<std::string, 256> spelled;
  std::unordered_map<uint32_t, uint8_t> back;
  ByteAlphabet() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      uint32_t cp = keep ? uint32_t(b) : next++;
      utf8_append(spelled[b], cp);
      back[cp] = uint8_t(b);
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return alphabet().spelled[b]; }

std::string bytes_to_unicode_text(std::string_view bytes) {
  const auto& a = alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) out += a.spelled[c];
  return out;
}

bool unicode_text_to_bytes(std::string_view text, std::string& out) {
  const auto& a = alphabet();
  std::string bytes;
  bytes.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp;
    pos += utf8_decode(text, pos, cp);
    auto it = a.back.find(cp);
    if (it == a.back.end()) return false;
    bytes.push_back(char(it->second));
  }
  out = std::move(bytes);
  return true;
}

size_t utf8_decode(std::string_view s, size_t pos, uint32_t& cp) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
  size_t left = s.size() - pos;
  cp = 0xFFFFFFFFu;
  unsigned char c = p[0];
  if (c < 0x80) {
    cp = c;
    return 1;
  }
  size_t n;
  uint32_t v, min;
  if ((c & 0xe0) == 0xc0) {
    n = 2, v = c & 0x1f, min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3, v = c & 0x0f, min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4, v = c & 0x07, min = 0x10000;
  } else {
    return 1;
  }
  if (left < n) return 1;
  for (size_t i = 1; i < n; ++i) {
    if ((p[i] & 0xc0) != 0x80) return 1;
    v = v << 6 | (p[i] & 0x3f);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 1;
  cp = v;
  return n;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xc0 | cp >> 6));
    out.push_back(char(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xe0 | cp >> 12));
    out.push_back(char(0x80 | (cp >> 6 & 0x3f)));
    out.push_back(char(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(char(0xf0 | cp >> 18));
    out.push_back(char(0x80 | (cp >> 12 & 0x3f)));
    out.push_back(char(0x80 | (cp >> 6 & 0x3f)));
    out.push_back(char(0x80 | (cp & 0x3f)));
  }
}

bool is_unicode_whitespace(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0a: case 0x0b: case 0x0c: case 0x0d: case 0x20: case 0x85: case 0xa0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202f: case 0x205f: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200a;
  }
}

}  // namespace llmctl
