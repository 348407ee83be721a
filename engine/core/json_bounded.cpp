#include "engine/core/json_bounded.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/core/error.h"

namespace llmctl {
namespace {

template <class Json>
Json parse_bounded(std::string_view text, const JsonLimits& limits, const std::string& what, size_t max_keys = 0) {
  LLM_REQUIRE(text.size() <= limits.max_bytes)
      << what << " is " << text.size() << " bytes, over the limit of " << limits.max_bytes << " bytes";
  // The callback sees each container open with the depth of its parent (0 at the top level), before
  // anything inside it is parsed; nlohmann's parser itself keeps an explicit stack, not recursion.
  using Event = typename Json::parse_event_t;
  constexpr size_t kArray = SIZE_MAX;
  std::vector<size_t> keys;  // per open container: keys seen so far (kArray for an array); max_keys only
  auto guard = [&](int depth, Event event, Json&) {
    if ((event == Event::object_start || event == Event::array_start) && depth >= limits.max_depth)
      LLM_THROW() << what << " is nested deeper than " << limits.max_depth << " levels of arrays/objects";
    if (max_keys == 0) return true;
    if (event == Event::object_start || event == Event::array_start) {
      keys.push_back(event == Event::object_start ? 0 : kArray);
    } else if (event == Event::object_end || event == Event::array_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == Event::key && !keys.empty() && keys.back() != kArray && ++keys.back() > max_keys) {
      LLM_THROW() << what << " has an object with over " << max_keys << " keys";
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), guard);
  } catch (const nlohmann::json::exception& e) {
    LLM_THROW() << what << " is not valid JSON: " << e.what();
  }
}

}  // namespace

nlohmann::json parse_json_bounded(std::string_view text, const JsonLimits& limits, const std::string& what) {
  return parse_bounded<nlohmann::json>(text, limits, what);
}

nlohmann::ordered_json parse_ordered_json_bounded(std::string_view text, const JsonLimits& limits,
                                                  const std::string& what) {
  return parse_bounded<nlohmann::ordered_json>(text, limits, what, kMaxOrderedObjectKeys);
}

nlohmann::json read_json_file_bounded(const std::string& path, const JsonLimits& limits) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  LLM_REQUIRE(!ec) << "cannot read '" << path << "': " << ec.message();
  LLM_REQUIRE(size <= limits.max_bytes)
      << "'" << path << "' is " << size << " bytes, over the limit of " << limits.max_bytes << " bytes";
  std::ifstream in(path, std::ios::binary);
  LLM_REQUIRE(in) << "cannot read '" << path << "'";
  std::string text(size, '\0');
  in.read(text.data(), std::streamsize(size));
  LLM_REQUIRE(in.gcount() == std::streamsize(size)) << "cannot read '" << path << "'";
  return parse_json_bounded(text, limits, "'" + path + "'");
}

size_t widest_object(const nlohmann::json& root) {
  size_t widest = 0;
  std::vector<const nlohmann::json*> todo{&root};
  while (!todo.empty()) {
    const nlohmann::json* v = todo.back();
    todo.pop_back();
    if (v->is_object()) widest = std::max(widest, v->size());
    if (v->is_structured())
      for (const auto& child : *v) todo.push_back(&child);
  }
  return widest;
}

}  // namespace llmctl
