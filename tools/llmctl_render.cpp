// llmctl_render: a chat template rendered by llmctl's Jinja interpreter, for tests and scripts
// that compare it with Python jinja2 (tests/e2e/test_llama_cpp_templates.py).
//   llmctl_render TEMPLATE_FILE CONTEXT_JSON_FILE
// Prints the rendered text to stdout (exit 0), or the error to stderr (exit 1). The context's keys
// keep the order the file gives them, as Python's dicts do.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/tokenizer/chat_template.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  LLM_REQUIRE(f) << "cannot open " << path;
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: llmctl_render TEMPLATE_FILE CONTEXT_JSON_FILE\n");
    return 2;
  }
  try {
    const std::string out = llmctl::render_chat_template_ordered(read_file(argv[1]),
                                                                 nlohmann::ordered_json::parse(read_file(argv[2])));
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llmctl_render: %s\n", e.what());
    return 1;
  }
}
