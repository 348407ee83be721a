// llmctl_tokenize: the tokenizer on the command line, for tests and scripts.
//   llmctl_tokenize SOURCE [--encode FILE] [--no-special] [--out FILE] [--roundtrip FILE]
//                   [--write-tokenizer-json FILE] [--write-tokenizer-config FILE]
// SOURCE is one of
//   --tokenizer-json FILE [--tokenizer-config FILE]   an HF tokenizer.json
//   --gguf-vocab-json FILE   GGUF tokenizer.ggml.* data dumped to JSON ({"tokens", "token_types",
//                            "merges", "pre", "bos", "eos", "pad", "add_bos", "chat_template"})
//   --sp-model FILE          a SentencePiece .model
//   --gguf FILE              a GGUF file's tokenizer (a model, or one of llama.cpp's vocab-only files)
// --encode prints the ids of the file's text, space-separated on one line; timing goes to stderr.
// --encode-cases FILE: llama.cpp's tokenizer test vectors (models/ggml-vocab-*.gguf.inp: texts
// separated by "\n__ggml_vocab_test__\n"), each encoded without special tokens (as its
// test-tokenizer-0 does), one line per text in the .out files' form (" id id ...").
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "engine/core/error.h"
#include "engine/model/gguf.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/sentencepiece_tokenizer.h"

using namespace llmctl;
using json = nlohmann::json;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  LLM_REQUIRE(f) << "cannot open " << path;
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json read_json(const std::string& path) { return json::parse(read_file(path)); }

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  LLM_REQUIRE(f) << "cannot write " << path;
  f << data;
}

std::unique_ptr<Tokenizer> load(const std::map<std::string, std::string>& a) {
  if (a.count("--tokenizer-json")) {
    json cfg = a.count("--tokenizer-config") ? read_json(a.at("--tokenizer-config")) : json();
    return BpeTokenizer::from_hf_json(read_json(a.at("--tokenizer-json")), cfg);
  }
  if (a.count("--gguf-vocab-json")) {
    json v = read_json(a.at("--gguf-vocab-json"));
    return BpeTokenizer::from_gguf_vocab(
        v.at("tokens").get<std::vector<std::string>>(), v.value("token_types", std::vector<int>{}),
        v.value("merges", std::vector<std::string>{}), v.value("pre", "default"), v.value("bos", -1),
        v.value("eos", -1), v.value("pad", -1), v.value("add_bos", false), v.value("chat_template", ""));
  }
  if (a.count("--sp-model")) {
    json cfg = a.count("--tokenizer-config") ? read_json(a.at("--tokenizer-config")) : json();
    return SentencePieceTokenizer::from_file(a.at("--sp-model"), cfg);
  }
  if (a.count("--gguf")) return load_gguf_tokenizer(*GgufFile::open(a.at("--gguf")));
  LLM_THROW() << "give --tokenizer-json, --gguf-vocab-json, --gguf or --sp-model";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::map<std::string, std::string> a;
    for (int i = 1; i < argc; ++i) {
      std::string k = argv[i];
      if (k == "--no-special") {
        a[k] = std::string(1, '1');
      } else if (k.rfind("--", 0) == 0 && i + 1 < argc) {
        a[k] = argv[++i];
      } else {
        LLM_THROW() << "unexpected argument '" << k << "' (see the comment at the top of llmctl_tokenize.cpp)";
      }
    }
    auto t0 = std::chrono::steady_clock::now();
    auto tok = load(a);
    std::fprintf(stderr, "loaded: %d tokens in %.3f s\n", tok->vocab_size(), seconds_since(t0));

    if (a.count("--write-tokenizer-json")) write_file(a["--write-tokenizer-json"], tok->to_hf_tokenizer_json().dump(2));
    if (a.count("--write-tokenizer-config"))
      write_file(a["--write-tokenizer-config"], tok->to_hf_tokenizer_config().dump(2));
    if (a.count("--encode")) {
      std::string text = read_file(a["--encode"]);
      t0 = std::chrono::steady_clock::now();
      std::vector<int> ids = tok->encode(text, !a.count("--no-special"));
      double dt = seconds_since(t0);
      std::fprintf(stderr, "encoded %zu bytes -> %zu tokens in %.3f s (%.1f MB/s)\n", text.size(), ids.size(), dt,
                   text.size() / 1e6 / dt);
      std::string out;
      out.reserve(ids.size() * 6);
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i) out += ' ';
        out += std::to_string(ids[i]);
      }
      out += '\n';
      if (a.count("--out")) write_file(a["--out"], out);
      else std::fwrite(out.data(), 1, out.size(), stdout);
    }
    if (a.count("--encode-cases")) {
      const std::string sep = "\n__ggml_vocab_test__\n", all = read_file(a["--encode-cases"]);
      std::string out;
      for (size_t at = 0; at < all.size();) {
        size_t end = all.find(sep, at);
        if (end == std::string::npos) end = all.size();
        for (int id : tok->encode(all.substr(at, end - at), false)) out += " " + std::to_string(id);
        out += '\n';
        at = end + sep.size();
      }
      if (a.count("--out")) write_file(a["--out"], out);
      else std::fwrite(out.data(), 1, out.size(), stdout);
    }
    if (a.count("--roundtrip")) {
      std::string text = read_file(a["--roundtrip"]);
      std::string back = tok->decode(tok->encode(text, true));
      if (back != text) {
        size_t i = 0;
        while (i < text.size() && i < back.size() && text[i] == back[i]) ++i;
        std::fprintf(stderr, "roundtrip MISMATCH at byte %zu of %zu\n", i, text.size());
        return 1;
      }
      std::fprintf(stderr, "roundtrip ok: %zu bytes\n", text.size());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llmctl_tokenize: %s\n", e.what());
    return 1;
  }
}
