#include "bench/stream_record.h"

#include <nlohmann/json.hpp>

namespace llmctl::bench {

void StreamRecord::on_data(const std::string& data, double t) {
  if (data == "[DONE]") {
    done = true;
    return;
  }
  nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    if (error.empty()) error = "malformed stream event: " + data.substr(0, 200);
    return;
  }
  if (j.contains("error")) {
    const auto& e = j["error"];
    error = e.is_object() && e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>()
                                                                                 : e.dump();
    return;
  }
  std::string piece;
  if (j.contains("choices") && j["choices"].is_array()) {
    for (const auto& c : j["choices"]) {
      if (!c.is_object()) continue;
      if (c.contains("text") && c["text"].is_string()) piece += c["text"].get<std::string>();
      if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content") &&
          c["delta"]["content"].is_string())
        piece += c["delta"]["content"].get<std::string>();
    }
  }
  if (!piece.empty()) {
    if (first < 0)
      first = t;
    else
      itl.push_back(t - last);
    last = t;
    ++text_chunks;
    text += piece;
  }
  if (j.contains("usage") && j["usage"].is_object()) {
    const auto& u = j["usage"];
    if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer()) prompt_tokens = u["prompt_tokens"];
    if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
      completion_tokens = u["completion_tokens"];
  }
}

void StreamRecord::finish(double t) {
  end = t;
  if (error.empty() && first < 0) error = "the stream carried no generated text";
}

double StreamRecord::tpot() const {
  const int n = output_tokens();
  return n > 1 && first >= 0 ? (end - first) / double(n - 1) : 0.0;
}

}  // namespace llmctl::bench
