// Resolves a Hugging Face hub model reference to a local path in the hub cache that
// huggingface_hub (and so transformers, vLLM, `hf download`) fills. Read-only: nothing is fetched.
//
// Reference syntax (the input is untrusted and validated strictly):
//   org/name                 the HF directory (snapshot with config.json), or its one GGUF file,
//                            or the Q4_K_M GGUF when there are several (llama.cpp's default)
//   org/name:FILE.gguf       that GGUF file of the repo (may sit in a subfolder: sub/FILE.gguf)
//   org/name:TAG             the GGUF file whose name holds the quant tag (Q4_K_M, q8_0, ...),
//                            matched case-insensitively, as llama.cpp's `-hf org/name:TAG` and ollama
//   org/name@REVISION[:...]  a branch or tag (refs/REVISION) or a 40-hex commit (snapshots/COMMIT);
//                            without it refs/main, or the only snapshot when refs/main is absent
// Cache layout: <root>/models--ORG--NAME/{refs/<revision> (holds a commit), snapshots/<commit>/
// (the files, symlinks into ../../blobs)}. Paths returned are inside snapshots/, the same path
// huggingface_hub.try_to_load_from_cache returns.
#pragma once
#include <optional>
#include <string>

namespace llmctl {

// The environment the cache root depends on, as values (so the logic is testable).
struct HfCacheEnv {
  std::string hf_hub_cache;           // $HF_HUB_CACHE
  std::string huggingface_hub_cache;  // $HUGGINGFACE_HUB_CACHE (the legacy name)
  std::string hf_home;                // $HF_HOME
  std::string xdg_cache_home;         // $XDG_CACHE_HOME
  std::string home;                   // $HOME, else the password database's home directory
};

HfCacheEnv hf_cache_env_from_process();

// huggingface_hub's constants.HF_HUB_CACHE: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else
// $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub ("~" expanded).
// Unlike Python, an empty variable counts as unset.
std::string hf_cache_root(const HfCacheEnv& env);

// A loose shape test, for telling a hub reference from a local path that does not exist: one '/'
// between two non-empty parts before any '@' or ':', no leading '/', '.' or '~'. The strict
// validation happens in resolve_hf_cache_model, so a malformed reference gets a precise message.
bool looks_like_hub_ref(const std::string& ref);

// The local path (a snapshot directory with config.json, or a .gguf file) of `ref`. Throws
// InputError naming what was looked for, where, and how to get it (`hf download ...`), or listing
// the GGUF files cached when the file or tag is missing or the choice is ambiguous.
std::string resolve_hf_cache_model(const std::string& ref, const HfCacheEnv& env);

// The same, with nullopt instead of any InputError.
std::optional<std::string> find_in_hf_cache(const std::string& ref, const HfCacheEnv& env);

}  // namespace llmctl
