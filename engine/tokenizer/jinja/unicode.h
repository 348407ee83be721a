// Python str semantics over UTF-8 std::string: lengths, indices and slices count code points,
// whitespace is Python's (str.isspace), case mapping uses the C.UTF-8 locale tables.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmctl::jinja {

std::u32string utf8_decode(std::string_view s);  // invalid bytes become U+FFFD
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t cp);

bool py_isspace(char32_t c);
bool py_isprintable(char32_t c);
char32_t to_upper(char32_t c);
char32_t to_lower(char32_t c);
bool is_cased(char32_t c);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);  // str.title()
// str.strip / lstrip / rstrip; `chars` null strips whitespace.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split / str.rsplit; `sep` null splits on whitespace runs.
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit,
                                  bool from_right = false);
std::vector<std::string> py_splitlines(std::string_view s);
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count);
int64_t py_count(std::string_view s, std::string_view sub);
int64_t py_find(std::string_view s, std::string_view sub, bool from_right);  // code point index

}  // namespace llmctl::jinja
