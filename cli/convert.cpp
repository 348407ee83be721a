// llmctl convert IN OUT: HF directory or GGUF in, HF directory (safetensors) out.
#include <iostream>

#include "cli/commands.h"
#include "engine/convert/convert.h"

namespace llmctl::cli {

Runner add_convert(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  auto dtype = std::make_shared<std::string>();
  auto shard = std::make_shared<std::string>("2GB");
  auto* s = app.add_subcommand("convert", "convert a checkpoint (HF directory or GGUF) to an HF safetensors directory");
  s->add_option("input", o->input, "HF directory or .gguf file")->required();
  s->add_option("output", o->output, "output directory")->required();
  s->add_option("--dtype", *dtype, "f32, f16 or bf16 (default: as stored; quantized GGUF tensors become f32)");
  s->add_option("--max-shard-size", *shard, "largest safetensors shard, e.g. 500MB, 2GB")->capture_default_str();
  return [o, dtype, shard]() -> int {
    if (!dtype->empty()) o->dtype = parse_dtype(*dtype);
    o->max_shard_bytes = parse_byte_size(*shard);
    ConvertReport r = convert_checkpoint(*o, [](const std::string& msg) { std::cerr << "llmctl: " << msg << "\n"; });
    std::cerr << "llmctl: wrote " << r.num_tensors << " tensors in " << r.num_shards << " shard(s), "
              << r.total_bytes / 1e6 << " MB, to " << o->output << "\n";
    return 0;
  };
}

}  // namespace llmctl::cli
