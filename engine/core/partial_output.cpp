#include "engine/core/partial_output.h"

#include <fstream>
#include <system_error>

#include "engine/core/error.h"

namespace fs = std::filesystem;

namespace llmctl {

PartialOutput::PartialOutput(const std::string& out, const std::string& what) : out_(out), part_(out + ".part") {
  LLM_REQUIRE(!out.empty()) << what << ": OUT is empty";
  std::error_code ec;
  LLM_REQUIRE(!fs::exists(out_, ec) || (fs::is_directory(out_, ec) && fs::is_empty(out_, ec)))
      << out << " exists and is not an empty directory: remove it or choose another OUT";
  LLM_REQUIRE(out_.extension() != ".gguf" && out_.extension() != ".safetensors")
      << "OUT " << out << ": " << what << " writes an HF directory (config.json + safetensors), not a single file; "
      << "name a directory";
  if (fs::exists(part_, ec)) {
    LLM_REQUIRE(fs::is_directory(part_, ec) && fs::exists(part_ / kMarker, ec))
        << part_.string() << " exists and was not left by an interrupted llmctl run: remove it or choose another OUT";
    fs::remove_all(part_, ec);
    LLM_REQUIRE(!ec) << "cannot remove the earlier " << part_.string() << ": " << ec.message();
  }
  fs::create_directories(part_, ec);
  LLM_REQUIRE(!ec) << "cannot create " << part_.string() << ": " << ec.message();
  std::ofstream marker(part_ / kMarker);
  LLM_REQUIRE(marker << what << "\n") << "cannot write in " << part_.string();
}

PartialOutput::~PartialOutput() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(part_, ec);  // best effort: an error here must not replace the one in flight
}

void PartialOutput::commit() {
  std::error_code ec;
  fs::remove(part_ / kMarker, ec);
  if (fs::exists(out_, ec)) fs::remove(out_, ec);  // the empty directory checked at construction
  fs::rename(part_, out_, ec);
  LLM_REQUIRE(!ec) << "cannot rename " << part_.string() << " to " << out_.string() << ": " << ec.message();
  committed_ = true;
}

}  // namespace llmctl
