// engine/model/hf_cache.h: hub references (org/name[@revision][:file.gguf|:tag]) resolved in a fake
// Hugging Face cache laid out as huggingface_hub lays it out (refs/, snapshots/ with relative
// symlinks into blobs/): the cache root's precedence, refs and revisions, HF directories, GGUF choice
// by file, tag and default, and every error's message; untrusted references never leave the repo.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "engine/core/error.h"
#include "engine/model/hf_cache.h"
#include "format_test_util.h"

using namespace llmctl;
namespace fs = std::filesystem;

namespace {

const std::string kMain = "1111111111111111111111111111111111111111";
const std::string kV1 = "2222222222222222222222222222222222222222";
const std::string kOther = "3333333333333333333333333333333333333333";

// One repo of a fake cache: files are blobs (named by a fake etag) linked from the snapshot as
// huggingface_hub links them: relative symlinks.
struct FakeRepo {
  fs::path dir;
  int blobs = 0;
  FakeRepo(const fs::path& root, const std::string& org, const std::string& name)
      : dir(root / ("models--" + org + "--" + name)) {
    fs::create_directories(dir / "blobs");
  }
  void add(const std::string& commit, const std::string& rel, const std::string& content = "x") {
    const std::string etag = "etag" + std::to_string(++blobs);
    test::write_text((dir / "blobs" / etag).string(), content);
    const fs::path link = dir / "snapshots" / commit / rel;
    fs::create_directories(link.parent_path());
    fs::create_symlink(fs::relative(dir / "blobs" / etag, link.parent_path()), link);
  }
  void ref(const std::string& name, const std::string& content) {
    fs::create_directories((dir / "refs" / name).parent_path());
    test::write_text((dir / "refs" / name).string(), content);
  }
  std::string snap(const std::string& commit, const std::string& rel = "") const {
    const fs::path p = dir / "snapshots" / commit;
    return rel.empty() ? p.string() : (p / rel).string();
  }
};

HfCacheEnv env_at(const fs::path& root) {
  HfCacheEnv env;
  env.hf_hub_cache = root.string();
  env.home = "/nonexistent-home";
  return env;
}

// The InputError's message, or a failed check when nothing (or something else) was thrown.
std::string error_of(const std::string& ref, const HfCacheEnv& env) {
  try {
    const std::string got = resolve_hf_cache_model(ref, env);
    FAIL_CHECK("no error for '" << ref << "': resolved to " << got);
  } catch (const InputError& e) {
    CHECK_FALSE(find_in_hf_cache(ref, env).has_value());
    return e.what();
  }
  return "";
}

std::string resolved(const std::string& ref, const HfCacheEnv& env) {
  const std::string path = resolve_hf_cache_model(ref, env);
  CHECK(find_in_hf_cache(ref, env) == path);
  return path;
}

}  // namespace

TEST_CASE("hf cache: the root follows huggingface_hub's precedence") {
  HfCacheEnv env;
  env.home = "/home/u";
  CHECK(hf_cache_root(env) == "/home/u/.cache/huggingface/hub");
  env.xdg_cache_home = "/xdg";
  CHECK(hf_cache_root(env) == "/xdg/huggingface/hub");
  env.hf_home = "~/hf";
  CHECK(hf_cache_root(env) == "/home/u/hf/hub");
  env.huggingface_hub_cache = "/legacy";
  CHECK(hf_cache_root(env) == "/legacy");
  env.hf_hub_cache = "~";
  CHECK(hf_cache_root(env) == "/home/u");
  env.hf_hub_cache = "/hub/";
  CHECK(hf_cache_root(env) == "/hub/");
}

TEST_CASE("hf cache: hub references are told from paths") {
  for (const char* ref : {"org/name", "Qwen/Qwen2.5-0.5B-Instruct", "org/name:Q4_K_M", "org/name@v1:x.gguf",
                          "org/name:sub/x.gguf", "org/x..y"})  // the last is malformed: strict checks come later
    CHECK_MESSAGE(looks_like_hub_ref(ref), ref);
  for (const char* ref : {"", "model.gguf", "/abs/org/name", "./org/name", "../x/y", "~/org/name", "a/b/c", "org/",
                          "/name", "org/:Q4_0", "org@v1/name"})
    CHECK_FALSE_MESSAGE(looks_like_hub_ref(ref), ref);
}

TEST_CASE("hf cache: an HF directory by refs/main, a branch, a commit") {
  test::ScratchDir root("hf_cache_dir");
  FakeRepo repo(root.path, "org", "model");
  for (const std::string& c : {kMain, kV1}) {
    repo.add(c, "config.json", "{}");
    repo.add(c, "model.safetensors");
  }
  repo.ref("main", kMain);  // huggingface_hub writes no newline; a trailing one is tolerated
  repo.ref("v1", kV1 + "\n");
  const HfCacheEnv env = env_at(root.path);
  CHECK(resolved("org/model", env) == repo.snap(kMain));
  CHECK(resolved("org/model@main", env) == repo.snap(kMain));
  CHECK(resolved("org/model@v1", env) == repo.snap(kV1));
  CHECK(resolved("org/model@" + kV1, env) == repo.snap(kV1));
  CHECK(fs::is_regular_file(repo.snap(kMain, "model.safetensors")));  // the symlinks resolve

  std::string e = error_of("org/model@v9", env);
  CHECK(e.find("revision 'v9' is not in the Hugging Face cache") != std::string::npos);
  CHECK(e.find("refs holds: main, v1") != std::string::npos);
  CHECK(e.find("`hf download org/model --revision v9`") != std::string::npos);
  e = error_of("org/model@" + kOther, env);
  CHECK(e.find("commit " + kOther + " is not in the Hugging Face cache") != std::string::npos);
  CHECK(e.find(kMain + ", " + kV1) != std::string::npos);
  e = error_of("org/model:Q4_K_M", env);
  CHECK(e.find("an HF directory (config.json): drop ':Q4_K_M'") != std::string::npos);
}

TEST_CASE("hf cache: an uncached repo names the cache and how to download") {
  test::ScratchDir root("hf_cache_none");
  const HfCacheEnv env = env_at(root.path);
  CHECK(error_of("Qwen/Qwen2.5-0.5B-Instruct", env) ==
        "model 'Qwen/Qwen2.5-0.5B-Instruct' is not a local path and is not in the Hugging Face cache (" +
            root.path.string() + "); download it with `hf download Qwen/Qwen2.5-0.5B-Instruct` (huggingface_hub) "
            "or pass a local directory or .gguf file");
  CHECK(error_of("org/m-GGUF:Q8_0", env).find("`hf download org/m-GGUF --include \"*Q8_0*.gguf\"`") !=
        std::string::npos);
  CHECK(error_of("org/m-GGUF@v2:m.f16.gguf", env).find("`hf download org/m-GGUF m.f16.gguf --revision v2`") !=
        std::string::npos);
}

TEST_CASE("hf cache: GGUF files by file name, tag and default") {
  test::ScratchDir root("hf_cache_gguf");
  FakeRepo repo(root.path, "org", "m-GGUF");
  for (const char* f : {"m.Q4_K_M.gguf", "m.Q4_K_S.gguf", "m.Q8_0.gguf", "m.IQ4_XS.gguf", "mmproj-m-f16.gguf",
                        "big/m.Q6_K-00001-of-00002.gguf", "big/m.Q6_K-00002-of-00002.gguf", "README.md"})
    repo.add(kMain, f);
  repo.ref("main", kMain);
  const HfCacheEnv env = env_at(root.path);
  CHECK(resolved("org/m-GGUF", env) == repo.snap(kMain, "m.Q4_K_M.gguf"));  // llama.cpp's default
  CHECK(resolved("org/m-GGUF:q8_0", env) == repo.snap(kMain, "m.Q8_0.gguf"));
  CHECK(resolved("org/m-GGUF:Q4_K_S", env) == repo.snap(kMain, "m.Q4_K_S.gguf"));
  CHECK(resolved("org/m-GGUF:iq4_xs", env) == repo.snap(kMain, "m.IQ4_XS.gguf"));
  CHECK(resolved("org/m-GGUF:Q6_K", env) == repo.snap(kMain, "big/m.Q6_K-00001-of-00002.gguf"));
  CHECK(resolved("org/m-GGUF:m.Q8_0.gguf", env) == repo.snap(kMain, "m.Q8_0.gguf"));
  CHECK(resolved("org/m-GGUF:mmproj-m-f16.gguf", env) == repo.snap(kMain, "mmproj-m-f16.gguf"));  // asked by name

  const std::string listed = "(GGUF files there: big/m.Q6_K-00001-of-00002.gguf, m.IQ4_XS.gguf, m.Q4_K_M.gguf, "
                             "m.Q4_K_S.gguf, m.Q8_0.gguf)";  // no projector, no later shard
  std::string e = error_of("org/m-GGUF:Q5_K_M", env);
  CHECK(e.find("no GGUF file matching tag 'Q5_K_M' in the cached snapshot " + repo.snap(kMain)) != std::string::npos);
  CHECK(e.find(listed) != std::string::npos);
  CHECK(e.find("`hf download org/m-GGUF --include \"*Q5_K_M*.gguf\"`") != std::string::npos);
  e = error_of("org/m-GGUF:m.Q2_K.gguf", env);
  CHECK(e.find("no file 'm.Q2_K.gguf' in the cached snapshot") != std::string::npos);
  CHECK(e.find(listed) != std::string::npos);
  e = error_of("org/m-GGUF:Q4_K", env);  // stands alone nowhere: both Q4_K_* hold it
  CHECK(e.find("tag 'Q4_K' matches several GGUF files") != std::string::npos);
  CHECK(e.find("(m.Q4_K_M.gguf, m.Q4_K_S.gguf); name one with org/m-GGUF:FILE.gguf") != std::string::npos);
}

TEST_CASE("hf cache: no default among several GGUF files; one file is the default") {
  test::ScratchDir root("hf_cache_choice");
  FakeRepo several(root.path, "org", "several");
  for (const char* f : {"a.Q8_0.gguf", "a.F16.gguf"}) several.add(kMain, f);
  several.ref("main", kMain);
  FakeRepo one(root.path, "org", "one");
  one.add(kMain, "a.Q8_0.gguf");
  one.add(kMain, "a.Q4_K_M-00002-of-00002.gguf");  // a stray later shard is not a choice
  one.ref("main", kMain);
  FakeRepo neither(root.path, "org", "neither");
  neither.add(kMain, "README.md");
  neither.add(kMain, "model.bin");
  neither.ref("main", kMain);
  const HfCacheEnv env = env_at(root.path);
  const std::string e = error_of("org/several", env);
  CHECK(e.find("several GGUF files in the cached snapshot " + several.snap(kMain) + " (a.F16.gguf, a.Q8_0.gguf); "
               "pick one with org/several:TAG") != std::string::npos);
  CHECK(resolved("org/one", env) == one.snap(kMain, "a.Q8_0.gguf"));
  CHECK(error_of("org/neither", env).find("no config.json and no .gguf file in the cached snapshot " +
                                          neither.snap(kMain) + " (files there: README.md, model.bin)") !=
        std::string::npos);
}

TEST_CASE("hf cache: without refs/main, the only snapshot") {
  test::ScratchDir root("hf_cache_norefs");
  FakeRepo repo(root.path, "org", "m");
  repo.add(kV1, "config.json");
  const HfCacheEnv env = env_at(root.path);
  CHECK(resolved("org/m", env) == repo.snap(kV1));
  repo.add(kOther, "config.json");
  CHECK(error_of("org/m", env).find("has no refs/main and 2 snapshots (" + kV1 + ", " + kOther +
                                    "); name one with org/m@COMMIT") != std::string::npos);
  FakeRepo empty(root.path, "org", "empty");
  CHECK(error_of("org/empty", env).find("has no refs/main and no snapshot; download it with `hf download org/empty`") !=
        std::string::npos);
}

TEST_CASE("hf cache: a damaged ref or a missing snapshot is named") {
  test::ScratchDir root("hf_cache_badref");
  FakeRepo repo(root.path, "org", "m");
  repo.add(kMain, "config.json");
  repo.ref("main", "../../../etc/passwd\x01");
  const HfCacheEnv env = env_at(root.path);
  std::string e = error_of("org/m", env);
  CHECK(e.find("refs/main holds '../../../etc/passwd?', not a commit hash; the cache entry is damaged") !=
        std::string::npos);
  repo.ref("main", kOther);
  e = error_of("org/m", env);
  CHECK(e.find("refs/main names commit " + kOther + ", which is not in " + repo.dir.string() + "/snapshots") !=
        std::string::npos);
}

TEST_CASE("hf cache: a dangling link (a blob not downloaded) is no file") {
  test::ScratchDir root("hf_cache_dangling");
  FakeRepo repo(root.path, "org", "m");
  repo.add(kMain, "m.Q8_0.gguf");
  repo.add(kMain, "m.Q4_0.gguf");
  repo.ref("main", kMain);
  fs::remove(repo.dir / "blobs" / "etag2");
  const HfCacheEnv env = env_at(root.path);
  CHECK(resolved("org/m", env) == repo.snap(kMain, "m.Q8_0.gguf"));
  CHECK(error_of("org/m:m.Q4_0.gguf", env).find("no file 'm.Q4_0.gguf'") != std::string::npos);
}

TEST_CASE("hf cache: malformed and hostile references are refused before any file is read") {
  test::ScratchDir root("hf_cache_hostile");
  FakeRepo repo(root.path, "org", "name");
  repo.add(kMain, "m.Q8_0.gguf");
  repo.ref("main", kMain);
  test::write_text(root.file("secret.gguf"), "x");
  const HfCacheEnv env = env_at(root.path);
  const std::string invalid = "nor a valid Hugging Face model reference (org/name[@revision][:file.gguf|:tag]): ";
  const std::pair<std::string, std::string> cases[] = {
      {"../x/y", "the repository must be org/name"},
      {"org/name:../../etc", "the tag may hold only"},
      {"org/name:../../secret.gguf", "the file must be '/'-separated names"},
      {"org/name:./m.Q8_0.gguf", "the file must be '/'-separated names"},
      {"org/name:/etc/x.gguf", "the file must be '/'-separated names"},
      {"org/name@../../..", "the revision must be '/'-separated names"},
      {"org/name@", "the revision is empty"},
      {"org/name:", "nothing after ':'"},
      {"org/name/x", "the repository must be org/name"},
      {"org--x/name", "the organization may not contain '--' or '..'"},
      {"org/x..y", "the name may not contain '--' or '..'"},
      {"org/-name", "the name may not start or end with '.' or '-'"},
      {"org/name.git", "the name may not end with '.git'"},
      {"org/na me", "the name may hold only"},
      {"org/na\nme", "the name may hold only"},
      {std::string(97, 'a') + "/name", "the organization is longer than 96 characters"},
      {"org/name:" + std::string(65, 'Q'), "the tag is longer than 64 characters"},
      {"org/name:" + std::string(600, 'Q'), "longer than 512 characters"},
  };
  for (const auto& [ref, reason] : cases) {
    const std::string e = error_of(ref, env);
    CHECK_MESSAGE(e.find(invalid + reason) != std::string::npos, ref << " -> " << e);
    CHECK_MESSAGE(e.find('\n') == std::string::npos, ref);  // untrusted text is shown printable
  }
}
