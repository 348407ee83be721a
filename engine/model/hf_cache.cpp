#include "engine/model/hf_cache.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <vector>

#include "engine/core/error.h"

namespace fs = std::filesystem;

namespace llmctl {

namespace {

constexpr size_t kMaxRefChars = 512;
constexpr size_t kMaxRepoPart = 96;  // huggingface_hub's validate_repo_id
constexpr size_t kMaxRevision = 128;
constexpr size_t kMaxFile = 255;
constexpr size_t kMaxTag = 64;
constexpr size_t kMaxListed = 20;     // names shown in a message
constexpr size_t kMaxEntries = 10000;  // directory entries walked in one snapshot
constexpr int kMaxDepth = 3;           // subfolders under a snapshot searched for GGUF files

struct HubRef {
  std::string text, org, name, revision, selector;
  bool selector_is_file = false;  // org/name:FILE.gguf rather than org/name:TAG
  std::string repo_id() const { return org + "/" + name; }
};

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ends_with_ci(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && lower(s.substr(s.size() - suffix.size())) == suffix;
}

bool is_commit_hash(const std::string& s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Untrusted text echoed in a message: printable ASCII only, bounded.
std::string shown(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 200)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  return s.size() > 200 ? out + "..." : out;
}

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kMaxListed; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kMaxListed) out += ", ... (" + std::to_string(names.size() - kMaxListed) + " more)";
  return out.empty() ? "none" : out;
}

// "" when valid, else the reason. One repo id part: huggingface_hub's rules.
std::string check_repo_part(const std::string& p, const char* what) {
  if (p.empty()) return std::string(what) + " is empty";
  if (p.size() > kMaxRepoPart) return std::string(what) + " is longer than 96 characters";
  if (!std::all_of(p.begin(), p.end(), name_char)) return std::string(what) + " may hold only A-Z a-z 0-9 . _ -";
  if (p.front() == '.' || p.front() == '-' || p.back() == '.' || p.back() == '-')
    return std::string(what) + " may not start or end with '.' or '-'";
  if (p.find("--") != std::string::npos || p.find("..") != std::string::npos)
    return std::string(what) + " may not contain '--' or '..'";
  return "";
}

// A relative path of name segments (a revision such as refs/pr/1, a file in a subfolder).
std::string check_rel_path(const std::string& p, const char* what, size_t max) {
  if (p.empty()) return std::string(what) + " is empty";
  if (p.size() > max) return std::string(what) + " is longer than " + std::to_string(max) + " characters";
  size_t start = 0;
  while (true) {
    const size_t end = std::min(p.find('/', start), p.size());
    const std::string seg = p.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == ".." || !std::all_of(seg.begin(), seg.end(), name_char))
      return std::string(what) + " must be '/'-separated names of A-Z a-z 0-9 . _ - (no '.' or '..')";
    if (end == p.size()) return "";
    start = end + 1;
  }
}

std::string check_tag(const std::string& t) {
  if (t.size() > kMaxTag) return "the tag is longer than 64 characters";
  if (!std::all_of(t.begin(), t.end(), name_char) || t.find("..") != std::string::npos)
    return "the tag may hold only A-Z a-z 0-9 . _ - (no '..')";
  return "";
}

[[noreturn]] void throw_invalid(const std::string& ref, const std::string& reason) {
  LLM_THROW() << "model '" << shown(ref) << "' is not a local path, nor a valid Hugging Face model reference "
              << "(org/name[@revision][:file.gguf|:tag]): " << reason;
}

// org/name[@REVISION][:SELECTOR]; throws InputError with the reason when malformed.
HubRef parse_ref(const std::string& ref) {
  if (ref.size() > kMaxRefChars) throw_invalid(ref, "longer than 512 characters");
  HubRef r;
  r.text = ref;
  std::string left = ref;
  if (const size_t colon = ref.find(':'); colon != std::string::npos) {
    left = ref.substr(0, colon);
    r.selector = ref.substr(colon + 1);
    if (r.selector.empty()) throw_invalid(ref, "nothing after ':'");
  }
  if (const size_t at = left.find('@'); at != std::string::npos) {
    r.revision = left.substr(at + 1);
    left = left.substr(0, at);
    if (const std::string why = check_rel_path(r.revision, "the revision", kMaxRevision); !why.empty())
      throw_invalid(ref, why);
  }
  const size_t slash = left.find('/');
  if (slash == std::string::npos || left.find('/', slash + 1) != std::string::npos)
    throw_invalid(ref, "the repository must be org/name");
  r.org = left.substr(0, slash);
  r.name = left.substr(slash + 1);
  for (const auto& [part, what] : {std::pair{r.org, "the organization"}, std::pair{r.name, "the name"}})
    if (const std::string why = check_repo_part(part, what); !why.empty()) throw_invalid(ref, why);
  if (ends_with_ci(r.name, ".git")) throw_invalid(ref, "the name may not end with '.git'");
  if (r.selector.empty()) return r;
  r.selector_is_file = ends_with_ci(r.selector, ".gguf");
  if (const std::string why = r.selector_is_file ? check_rel_path(r.selector, "the file", kMaxFile) : check_tag(r.selector);
      !why.empty())
    throw_invalid(ref, why);
  return r;
}

// The `hf download` command that fetches what `r` asks for.
std::string download_hint(const HubRef& r) {
  std::string cmd = "hf download " + r.repo_id();
  if (r.selector_is_file) cmd += " " + r.selector;
  else if (!r.selector.empty()) cmd += " --include \"*" + r.selector + "*.gguf\"";
  if (!r.revision.empty()) cmd += " --revision " + r.revision;
  return "`" + cmd + "`";
}

std::vector<std::string> dir_names(const fs::path& dir, bool dirs) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end && out.size() < kMaxEntries; it.increment(ec))
    if (dirs ? it->is_directory(ec) : it->is_regular_file(ec)) out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The snapshot directory that the revision (or refs/main, or the only snapshot) names.
fs::path pick_snapshot(const HubRef& r, const fs::path& repo) {
  std::error_code ec;
  const fs::path snapshots = repo / "snapshots";
  const std::string where = repo.string();
  if (is_commit_hash(r.revision)) {
    LLM_REQUIRE(fs::is_directory(snapshots / r.revision, ec))
        << "model '" << r.text << "': commit " << r.revision << " is not in the Hugging Face cache (" << where
        << "/snapshots holds: " << listed(dir_names(snapshots, true)) << "); download it with " << download_hint(r);
    return snapshots / r.revision;
  }
  const std::string rev = r.revision.empty() ? "main" : r.revision;
  const fs::path ref_file = repo / "refs" / rev;
  if (fs::is_regular_file(ref_file, ec)) {
    std::string commit(256, '\0');
    std::ifstream in(ref_file, std::ios::binary);
    commit.resize(size_t(in.read(commit.data(), std::streamsize(commit.size())).gcount()));
    while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
    LLM_REQUIRE(is_commit_hash(commit)) << "model '" << r.text << "': " << ref_file.string() << " holds '"
                                        << shown(commit) << "', not a commit hash; the cache entry is damaged: "
                                        << "download it again with " << download_hint(r);
    LLM_REQUIRE(fs::is_directory(snapshots / commit, ec))
        << "model '" << r.text << "': refs/" << rev << " names commit " << commit << ", which is not in " << where
        << "/snapshots; download it again with " << download_hint(r);
    return snapshots / commit;
  }
  if (r.revision.empty()) {  // e.g. downloaded with --revision <commit>: no refs/main
    const std::vector<std::string> snaps = dir_names(snapshots, true);
    if (snaps.size() == 1) return snapshots / snaps[0];
    LLM_REQUIRE(!snaps.empty()) << "model '" << r.text << "': " << where << " has no refs/main and no snapshot; "
                                << "download it with " << download_hint(r);
    LLM_THROW() << "model '" << r.text << "': " << where << " has no refs/main and " << snaps.size()
                << " snapshots (" << listed(snaps) << "); name one with " << r.repo_id() << "@COMMIT";
  }
  LLM_THROW() << "model '" << r.text << "': revision '" << rev << "' is not in the Hugging Face cache (" << where
              << "/refs holds: " << listed(dir_names(repo / "refs", false)) << "); download it with "
              << download_hint(r);
}

// A split GGUF's later shard (name-0000K-of-0000N.gguf, K > 1): loaded through its first shard.
bool later_shard(const std::string& lower_name) {
  const std::string stem = lower_name.substr(0, lower_name.size() - 5);  // without .gguf
  if (stem.size() < 15) return false;
  const std::string tail = stem.substr(stem.size() - 15);  // -00001-of-00003
  for (size_t i : {1, 2, 3, 4, 5, 10, 11, 12, 13, 14})
    if (!std::isdigit(static_cast<unsigned char>(tail[i]))) return false;
  return tail[0] == '-' && tail.compare(6, 4, "-of-") == 0 && tail.compare(1, 5, "00001") != 0;
}

// GGUF model files of a snapshot, relative and sorted: no projector (mmproj) files, no later shards.
std::vector<std::string> gguf_files(const fs::path& snap) {
  std::vector<std::string> out;
  std::error_code ec;
  size_t seen = 0;
  fs::recursive_directory_iterator it(snap, ec), end;
  for (; !ec && it != end && ++seen <= kMaxEntries; it.increment(ec)) {
    if (it.depth() >= kMaxDepth) it.disable_recursion_pending();
    const std::string name = lower(it->path().filename().string());
    if (!ends_with_ci(name, ".gguf") || name.find("mmproj") != std::string::npos || later_shard(name)) continue;
    if (it->is_regular_file(ec)) out.push_back(it->path().lexically_relative(snap).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Files whose path holds `tag` (case-insensitive); when several, those where it stands alone
// (no letter, digit or '_' either side), so Q4_K picks neither Q4_K_M nor IQ4_K_S by accident.
std::vector<std::string> match_tag(const std::vector<std::string>& files, const std::string& tag) {
  const std::string t = lower(tag);
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::vector<std::string> any, alone;
  for (const std::string& f : files) {
    const std::string l = lower(f);
    bool found = false, delimited = false;
    for (size_t at = l.find(t); at != std::string::npos; at = l.find(t, at + 1)) {
      found = true;
      const size_t after = at + t.size();
      if ((at == 0 || !word(l[at - 1])) && (after == l.size() || !word(l[after]))) delimited = true;
    }
    if (found) any.push_back(f);
    if (delimited) alone.push_back(f);
  }
  return alone.empty() ? any : alone;
}

std::string resolve(const HubRef& r, const std::string& root) {
  std::error_code ec;
  const fs::path repo = fs::path(root) / ("models--" + r.org + "--" + r.name);
  LLM_REQUIRE(fs::is_directory(repo, ec))
      << "model '" << r.text << "' is not a local path and is not in the Hugging Face cache (" << root
      << "); download it with " << download_hint(r) << " (huggingface_hub) or pass a local directory or .gguf file";
  const fs::path snap = pick_snapshot(r, repo);
  const std::string in_snap = "in the cached snapshot " + snap.string();
  if (r.selector.empty() && fs::is_regular_file(snap / "config.json", ec)) return snap.string();
  const std::vector<std::string> files = gguf_files(snap);
  if (r.selector_is_file) {
    LLM_REQUIRE(fs::is_regular_file(snap / r.selector, ec))
        << "model '" << r.text << "': no file '" << r.selector << "' " << in_snap << " (GGUF files there: "
        << listed(files) << "); download it with " << download_hint(r);
    return (snap / r.selector).string();
  }
  const bool hf_dir = fs::is_regular_file(snap / "config.json", ec);
  LLM_REQUIRE(!files.empty() || !hf_dir) << "model '" << r.text << "': no .gguf file " << in_snap
                                         << ", an HF directory (config.json): drop ':" << r.selector
                                         << "' to load it";
  LLM_REQUIRE(!files.empty()) << "model '" << r.text << "': no config.json and no .gguf file " << in_snap
                              << " (files there: " << listed(dir_names(snap, false)) << "); download the model with "
                              << download_hint(r);
  if (!r.selector.empty()) {
    const std::vector<std::string> hits = match_tag(files, r.selector);
    LLM_REQUIRE(!hits.empty()) << "model '" << r.text << "': no GGUF file matching tag '" << r.selector << "' "
                               << in_snap << " (GGUF files there: " << listed(files) << "); download it with "
                               << download_hint(r);
    LLM_REQUIRE(hits.size() == 1) << "model '" << r.text << "': tag '" << r.selector << "' matches several GGUF files "
                                  << in_snap << " (" << listed(hits) << "); name one with " << r.repo_id()
                                  << ":FILE.gguf";
    return (snap / hits[0]).string();
  }
  if (files.size() == 1) return (snap / files[0]).string();
  if (const std::vector<std::string> q4 = match_tag(files, "Q4_K_M"); q4.size() == 1) return (snap / q4[0]).string();
  LLM_THROW() << "model '" << r.text << "': several GGUF files " << in_snap << " (" << listed(files)
              << "); pick one with " << r.repo_id() << ":TAG (a quant such as Q8_0) or " << r.repo_id()
              << ":FILE.gguf";
}

std::string expand_user(const std::string& p, const std::string& home) {
  if (p == "~" || p.rfind("~/", 0) == 0) return home + p.substr(1);
  return p;  // ~user and $VARS are left as they are
}

}  // namespace

HfCacheEnv hf_cache_env_from_process() {
  auto get = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  HfCacheEnv env{get("HF_HUB_CACHE"), get("HUGGINGFACE_HUB_CACHE"), get("HF_HOME"), get("XDG_CACHE_HOME"), get("HOME")};
  if (env.home.empty()) {  // as Python's expanduser does
    std::vector<char> buf(16384);
    passwd pw{}, *found = nullptr;
    if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &found) == 0 && found && found->pw_dir)
      env.home = found->pw_dir;
  }
  return env;
}

std::string hf_cache_root(const HfCacheEnv& env) {
  if (!env.hf_hub_cache.empty()) return expand_user(env.hf_hub_cache, env.home);
  if (!env.huggingface_hub_cache.empty()) return expand_user(env.huggingface_hub_cache, env.home);
  if (!env.hf_home.empty()) return (fs::path(expand_user(env.hf_home, env.home)) / "hub").string();
  const std::string cache = !env.xdg_cache_home.empty() ? env.xdg_cache_home : env.home + "/.cache";
  return (fs::path(expand_user(cache, env.home)) / "huggingface" / "hub").string();
}

bool looks_like_hub_ref(const std::string& ref) {
  if (ref.empty() || ref.size() > kMaxRefChars || ref[0] == '/' || ref[0] == '.' || ref[0] == '~') return false;
  const std::string repo = ref.substr(0, ref.find_first_of("@:"));
  const size_t slash = repo.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < repo.size() &&
         repo.find('/', slash + 1) == std::string::npos;
}

std::string resolve_hf_cache_model(const std::string& ref, const HfCacheEnv& env) {
  return resolve(parse_ref(ref), hf_cache_root(env));
}

std::optional<std::string> find_in_hf_cache(const std::string& ref, const HfCacheEnv& env) {
  try {
    return resolve_hf_cache_model(ref, env);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

}  // namespace llmctl
