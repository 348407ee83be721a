// PartialOutput: an output directory written as OUT.part and renamed to OUT only when complete, for
// `convert` and `quantize`. States: constructed (OUT.part created, holding a marker file) ->
// committed (renamed to OUT) | abandoned (destroyed without commit: OUT.part removed, so an error or
// an interruption leaves nothing behind).
//
// OUT must be absent or an empty directory, and not a single-file name (.gguf, .safetensors). An
// OUT.part that exists is removed only when it holds the marker, i.e. an earlier llmctl run left
// it; any other directory of that name is refused, never deleted. Every filesystem failure is an
// InputError naming the path.
#pragma once
#include <filesystem>
#include <string>

namespace llmctl {

class PartialOutput {
 public:
  // `what` names the command in messages ("convert", "quantize").
  PartialOutput(const std::string& out, const std::string& what);
  ~PartialOutput();
  PartialOutput(const PartialOutput&) = delete;
  PartialOutput& operator=(const PartialOutput&) = delete;

  const std::filesystem::path& path() const { return part_; }  // write here
  void commit();                                             // OUT.part -> OUT

  static constexpr const char* kMarker = ".llmctl-partial";

 private:
  std::filesystem::path out_, part_;
  bool committed_ = false;
};

}  // namespace llmctl
