// The input budget of `llmctl serve` without a model: request bodies parsed within a count of JSON
// values (and in linear time), texts tokenized within a count of tokens (encode_capped: a text that
// cannot fit is refused after a window or so, and one that fits gets exactly tok.encode's ids), the
// OpenAI and TGI parsers refusing an over-long prompt before tokenizing all of it, and client values
// quoted whole and bounded in error messages.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "byte_tokenizer.h"
#include "engine/core/json_bounded.h"
#include "server/api_error.h"
#include "server/http/http_types.h"
#include "server/json_body.h"
#include "server/openai_api.h"
#include "server/tgi_api.h"
#include "server/token_budget.h"

using namespace llmctl;
using namespace llmctl::server;
using json = nlohmann::json;

namespace {

// ByteTokenizer's ids (BOS optional), remembering every text it was asked to encode.
class CountingTokenizer final : public Tokenizer {
 public:
  explicit CountingTokenizer(bool add_bos = false) {
    eos_id_ = test::ByteTokenizer::kImEnd;
    bos_id_ = pad_id_ = test::ByteTokenizer::kEndOfText;
    add_bos_ = add_bos;
    set_chat_template(
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
        "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");
  }
  std::vector<int> encode(std::string_view text, bool parse_special = true) const override {
    calls.emplace_back(text);
    encoded_bytes += text.size();
    return bytes_.encode(text, parse_special);
  }
  std::string decode(const std::vector<int>& ids, bool skip_special = false) const override {
    return bytes_.decode(ids, skip_special);
  }
  std::string token_bytes(int id) const override { return bytes_.token_bytes(id); }
  std::string token_text(int id) const override { return bytes_.token_text(id); }
  int token_to_id(std::string_view piece) const override { return bytes_.token_to_id(piece); }
  int vocab_size() const override { return bytes_.vocab_size(); }
  bool is_special(int id) const override { return bytes_.is_special(id); }
  nlohmann::json to_hf_tokenizer_json() const override { return nullptr; }

  mutable std::vector<std::string> calls;
  mutable size_t encoded_bytes = 0;

 private:
  test::ByteTokenizer bytes_;
};

http::HttpRequest request(std::string body) {
  http::HttpRequest r;
  r.body = std::move(body);
  return r;
}

// The ApiError `fn` throws (fails the test when it throws none).
template <class Fn>
ApiError refusal(Fn fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    return e;
  }
  FAIL("no ApiError thrown");
  return ApiError(0, "");
}

std::string words(size_t bytes) {
  std::string s;
  while (s.size() < bytes) s += "word ";
  return s.substr(0, bytes);
}
}  // namespace

TEST_CASE("encode_capped: a text that fits gets exactly tok.encode's ids, whatever the windows") {
  const std::string texts[] = {words(300), std::string(300, 'x'), "<|im_start|>user\nhi<|im_end|>\n" + words(200),
                               std::string(120, ' ') + "a  b\t\tc\n\nd" + std::string(100, '\n'),
                               [] { std::string s; for (int i = 0; i < 100; ++i) s += "\xc3\xa9\xe2\x82\xac"; return s; }()};
  for (const bool bos : {false, true}) {
    CountingTokenizer tok(bos);
    for (const std::string& text : texts) {
      std::vector<int> want = tok.encode(text, true);
      if (bos) want.insert(want.begin(), tok.bos_id());
      for (const size_t window : {size_t(0), size_t(1), size_t(7), size_t(16), size_t(64), size_t(1000)}) {
        INFO("window " << window << ", bos " << bos << ", text " << text.substr(0, 20));
        const CappedTokens t = encode_capped(tok, text, true, bos, 10000, window);
        CHECK_FALSE(t.over);
        CHECK(t.ids == want);
        CHECK(t.count == want.size());
      }
    }
  }
  // Specials cut in two by the windows are not counted against the text (a slack per cut).
  CountingTokenizer tok;
  std::string specials;
  for (int i = 0; i < 100; ++i) specials += "<|im_start|>";
  const CappedTokens t = encode_capped(tok, specials, true, false, 100, 16);
  CHECK_FALSE(t.over);
  CHECK(t.ids == std::vector<int>(100, test::ByteTokenizer::kImStart));
}

TEST_CASE("encode_capped: a text that cannot fit is refused after about max_tokens of it") {
  CountingTokenizer tok;
  const std::string text = words(1 << 20);
  const CappedTokens t = encode_capped(tok, text, true, false, 100, 1000);
  CHECK(t.over);
  CHECK_FALSE(t.exact);
  CHECK(t.ids.empty());
  CHECK(tok.encoded_bytes <= 1000);  // one window, not the 1 MiB
  // Windows end before a space that follows a word, or else on a code point boundary.
  tok.calls.clear();
  encode_capped(tok, words(5000), true, false, 100000, 64);
  REQUIRE(tok.calls.size() > 2);
  for (size_t i = 1; i + 1 < tok.calls.size(); ++i) CHECK(tok.calls[i].front() == ' ');
  std::string accents;
  for (int i = 0; i < 2000; ++i) accents += "\xc3\xa9";
  tok.calls.clear();
  encode_capped(tok, accents, true, false, 100000, 63);
  REQUIRE(tok.calls.size() > 2);
  for (size_t i = 0; i + 1 < tok.calls.size(); ++i) CHECK((static_cast<unsigned char>(tok.calls[i].front()) & 0xC0) != 0x80);
  // Over by less than the slack: counted whole, the exact count is known.
  const CappedTokens near = encode_capped(tok, std::string(105, 'a'), true, false, 100, 10);
  CHECK(near.over);
  CHECK(near.exact);
  CHECK(near.count == 105);
  const CappedTokens bos = encode_capped(CountingTokenizer(true), std::string(100, 'a'), true, true, 100);
  CHECK(bos.over);
  CHECK(bos.count == 101);
}

TEST_CASE("parse_json_body: values counted while parsing, depth bounded, linear in the objects") {
  const JsonBudget five{5, "too many", "tokens"};
  CHECK(parse_json_body(request(R"({"tokens": [1, 2, 3]})"), five)["tokens"].size() == 3);
  const ApiError e = refusal([&] { (void)parse_json_body(request(R"({"tokens": [1, 2, 3, 4]})"), five); });
  CHECK(e.status() == 400);
  CHECK(e.message() == "too many");
  CHECK(e.param() == "tokens");
  const std::string ok_depth = std::string(64, '[') + std::string(64, ']');
  CHECK(parse_json_body(request(ok_depth)).is_array());
  const std::string deep = std::string(65, '[') + std::string(65, ']');
  CHECK(refusal([&] { (void)parse_json_body(request(deep)); }).message().find("nested deeper than 64") != std::string::npos);
  CHECK(refusal([&] { (void)parse_json_body(request("{\"a\": 1} x")); }).message().find("not valid JSON") != std::string::npos);
  CHECK(refusal([&] { (void)parse_json_body(request("")); }).message().find("empty") != std::string::npos);
  CHECK(refusal([&] { (void)parse_json_body(request("\"\xff\"")); }).message().find("UTF-8") != std::string::npos);
  // 200,000 objects in a list: nlohmann's callback parser took ~60 s (quadratic); this one takes
  // ~0.3 s (1.5 s in the sanitizer build at -O0): the bound tells linear from quadratic, not speed.
  std::string many = "{\"messages\": [{}";
  for (int i = 1; i < 200000; ++i) many += ",{}";
  many += "]}";
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(parse_json_body(request(many))["messages"].size() == 200000);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10.0);
}

TEST_CASE("client values in messages: quoted whole, JSON-escaped, bounded") {
  CHECK(quoted_value(std::string("a\0b", 3)) == "'a\\u0000b'");
  CHECK(quoted_value("say \"hi\"\n") == "'say \\\"hi\\\"\\n'");
  CHECK(quoted_value(std::string(1000, 'm'), 10) == "'mmmmmmmmmm... (1000 bytes)'");
  std::string accents;
  for (int i = 0; i < 10; ++i) accents += "\xc3\xa9";
  CHECK(quoted_value(accents, 5) == "'\xc3\xa9\xc3\xa9... (20 bytes)'");  // not cut inside a code point
  // The message of an ApiError keeps every byte (what() would stop at a NUL).
  const std::string nul("x\0y", 3);
  CHECK(ApiError(400, nul).body()["error"]["message"] == nul);
}

TEST_CASE("openai and tgi: an over-long prompt is refused before it is all tokenized") {
  CountingTokenizer tok;
  ModelLimits limits;
  limits.served_name = "tiny";
  limits.vocab_size = test::ByteTokenizer::kVocab;
  limits.max_context = 128;
  const std::string text = words(1 << 20);
  auto cmpl = [&](const json& body) { return parse_openai_request(OpenAiApi::completions, body, tok, limits); };
  auto chat = [&](const json& body) { return parse_openai_request(OpenAiApi::chat, body, tok, limits); };

  ApiError e = refusal([&] { cmpl({{"prompt", text}}); });
  CHECK(e.status() == 400);
  CHECK(e.param() == "prompt");
  CHECK(e.code() == "context_length_exceeded");
  CHECK(e.message().find("more than 127 tokens; the model's context is 128") != std::string::npos);
  CHECK(tok.encoded_bytes <= kCountWindowBytes);
  tok.encoded_bytes = 0;
  e = refusal([&] { cmpl({{"prompt", json::array({"a", text})}}); });
  CHECK(e.param() == "prompt");
  CHECK(tok.encoded_bytes <= kCountWindowBytes + 1);
  e = refusal([&] { cmpl({{"prompt", std::vector<int>(200, 1)}}); });
  CHECK(e.message().find("the prompt has 200 tokens") != std::string::npos);
  tok.encoded_bytes = 0;
  e = refusal([&] { chat({{"messages", {{{"role", "user"}, {"content", text}}}}}); });
  CHECK(e.param() == "messages");
  CHECK(e.message().find("more than 127 tokens") != std::string::npos);
  CHECK(tok.encoded_bytes <= kCountWindowBytes);
  tok.encoded_bytes = 0;
  e = refusal([&] { parse_tgi_request({{"inputs", text}}, tok, limits); });
  CHECK(e.param() == "inputs");
  CHECK(e.message().find("more than 127 tokens") != std::string::npos);
  CHECK(tok.encoded_bytes <= kCountWindowBytes);
  // Prompts that fit are as before.
  CHECK(cmpl({{"prompt", std::string(127, 'a')}}).prompts[0] == test::ByteTokenizer::bytes(std::string(127, 'a')));
  CHECK(refusal([&] { cmpl({{"prompt", std::string(128, 'a')}}); }).message().find("the prompt has 128 tokens") != std::string::npos);

  // The model's name: quoted whole in the 404 (it was cut at a NUL), and bounded.
  e = refusal([&] { cmpl({{"prompt", "a"}, {"model", std::string("a\0b", 3)}}); });
  CHECK(e.status() == 404);
  CHECK(e.param() == "model");
  CHECK(e.message() == "the model 'a\\u0000b' does not exist; this server serves 'tiny'");
  e = refusal([&] { cmpl({{"prompt", "a"}, {"model", std::string(100000, 'm')}}); });
  CHECK(e.message().size() < 400);
  CHECK(e.message().find("(100000 bytes)") != std::string::npos);
}

TEST_CASE("parse_ordered_json_bounded: key order kept, an object's keys bounded while parsing, arrays not counted") {
  const nlohmann::ordered_json j = parse_ordered_json_bounded(R"({"b": 1, "a": [1, 2, {"z": 0, "y": 1}]})",
                                                              kRequestJsonLimits, "x");
  CHECK(j.dump() == R"({"b":1,"a":[1,2,{"z":0,"y":1}]})");
  std::string wide = "{", long_array = "[";
  for (size_t i = 0; i <= kMaxOrderedObjectKeys; ++i) {
    wide += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
    long_array += (i ? ",{\"a\":" : "{\"a\":") + std::to_string(i) + "}";
  }
  CHECK_THROWS_WITH_AS(parse_ordered_json_bounded(wide + "}", kRequestJsonLimits, "the field"),
                       "the field has an object with over 4096 keys", InputError);
  CHECK(parse_ordered_json_bounded("[" + wide.substr(0, wide.rfind(',')) + "}]", kRequestJsonLimits, "x").size() == 1);
  CHECK(parse_ordered_json_bounded(long_array + "]", kRequestJsonLimits, "x").size() == kMaxOrderedObjectKeys + 1);
  CHECK(parse_json_bounded(wide + "}", kRequestJsonLimits, "x").size() == kMaxOrderedObjectKeys + 1);  // sorted: no bound
}
