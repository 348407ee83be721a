#!/usr/bin/env python3
"""`--model org/name[:TAG|:FILE.gguf]` finds models in the Hugging Face hub cache
(engine/model/hf_cache.h), in a cache that huggingface_hub's own code lays out: a local HTTP server
mimics the hub's file API (HEAD/GET /{repo}/resolve/{revision}/{file}) and
huggingface_hub.hf_hub_download fills a temporary cache from it (refs/, snapshots/, blobs/).

Served: test-org/SmolLM2-GGUF (the default model's GGUF, a dummy Q8_0 GGUF and a dummy projector)
and test-org/SmolLM2 (an HF directory made by `llmctl convert`). Checked, with HF_HUB_CACHE set:
1. by tag (any case) and by file name, llmctl loads the file huggingface_hub.try_to_load_from_cache
   returns, and generates what the GGUF's own path generates; the HF repo loads the snapshot
   directory and generates what the converted directory generates;
2. an existing local path wins over the cache;
3. errors (exit 1): an uncached repo names the cache (HF_HOME's too) and `hf download`; a missing
   tag lists the GGUF files (no projector); several GGUF files without a tag are listed; a
   malformed reference is refused.
Usage: test_hf_cache.py BUILD_DIR. Skipped (77) without huggingface_hub, llmctl or the default model.
"""
import hashlib
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

GGUF_REPO, HF_REPO = "test-org/SmolLM2-GGUF", "test-org/SmolLM2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
PROMPT = "The capital of France is"


def commit_of(repo_id):
    return hashlib.sha1(repo_id.encode()).hexdigest()  # 40 hex: what X-Repo-Commit carries


class HubHandler(http.server.BaseHTTPRequestHandler):
    """The hub's file endpoint, as much as hf_hub_download needs: X-Repo-Commit, an ETag (the
    blob's name in the cache) and the size. No X-Xet-* headers, so the library downloads by plain
    HTTP GET. `repos` maps repo_id -> {relative file name: local path}."""
    repos = {}
    etags = {}

    def log_message(self, *args):
        pass

    def route(self):
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", self.path.split("?")[0])
        if not m or m.group(1) not in self.repos:
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        repo_id, revision, name = m.groups()
        commit = commit_of(repo_id)
        local = self.repos[repo_id].get(name)
        if revision not in ("main", commit) or local is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "RevisionNotFound" if local else "EntryNotFound")
            self.send_header("X-Repo-Commit", commit)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if local not in self.etags:
            h = hashlib.sha256()
            with open(local, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
            self.etags[local] = h.hexdigest()
        size = os.path.getsize(local)
        self.send_response(200)
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", f'"{self.etags[local]}"')
        self.send_header("X-Linked-Etag", f'"{self.etags[local]}"')  # as for an LFS file
        self.send_header("X-Linked-Size", str(size))
        self.send_header("Content-Length", str(size))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        return local

    def do_HEAD(self):
        self.route()

    def do_GET(self):
        local = self.route()
        if local:
            with open(local, "rb") as f:
                shutil.copyfileobj(f, self.wfile)


def fill_cache(repos, cache_dir):
    """Serves `repos` and downloads every file into cache_dir with huggingface_hub; returns the
    local paths the library gave, {repo_id: {name: path}}."""
    import huggingface_hub

    HubHandler.repos = repos
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HubHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        return {repo_id: {name: huggingface_hub.hf_hub_download(repo_id, name, endpoint=endpoint, cache_dir=cache_dir,
                                                                token=False)
                          for name in files}
                for repo_id, files in repos.items()}
    finally:
        server.shutdown()
        server.server_close()


def cache_tree(cache_dir):
    """The cache as lines `path [-> link target]`, for the log."""
    lines = []
    for dirpath, dirnames, filenames in os.walk(cache_dir):
        dirnames.sort()
        for n in sorted(filenames):
            p = os.path.join(dirpath, n)
            rel = os.path.relpath(p, cache_dir)
            lines.append(f"{rel} -> {os.readlink(p)}" if os.path.islink(p) else rel)
    return lines


def files_under(d):
    return {os.path.relpath(os.path.join(dp, n), d): os.path.join(dp, n) for dp, _, ns in os.walk(d) for n in ns}


def main():
    build = os.path.abspath(sys.argv[1])
    llmctl = os.path.join(build, "llmctl")
    home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
    gguf = os.path.join(home, "models/SmolLM2-135M-Instruct", GGUF_NAME)
    for path, what in ((llmctl, "llmctl"), (gguf, "the default model's GGUF")):
        if not os.path.exists(path):
            print(f"SKIP: {what} ({path}) not found")
            return 77
    tmp = tempfile.mkdtemp(prefix="llmctl_hf_cache_")
    # huggingface_hub reads its settings at import: keep it off the user's HF_HOME and off xet.
    os.environ.update(HF_HOME=os.path.join(tmp, "hf_home"), HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_TELEMETRY="1",
                      HF_HUB_DISABLE_PROGRESS_BARS="1")
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "HF_ENDPOINT"):
        os.environ.pop(var, None)
    try:
        try:
            import huggingface_hub
        except ImportError:
            print("SKIP: huggingface_hub is not installed (pip install huggingface_hub)")
            return 77
        return run_checks(llmctl, gguf, tmp, huggingface_hub)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_checks(llmctl, gguf, tmp, huggingface_hub):
    converted = os.path.join(tmp, "converted")
    p = subprocess.run([llmctl, "convert", gguf, converted], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    dummy = os.path.join(tmp, "dummy.gguf")
    with open(dummy, "wb") as f:
        f.write(b"not a model: only its name is chosen")
    cache = os.path.join(tmp, "hub")
    got = fill_cache({GGUF_REPO: {GGUF_NAME: gguf, "SmolLM2-135M-Instruct.Q8_0.gguf": dummy,
                                  "mmproj-SmolLM2-f16.gguf": dummy},
                      HF_REPO: files_under(converted)}, cache)
    print("\n".join(["cache laid out by huggingface_hub:"] + cache_tree(cache)))
    for repo_id, files in got.items():
        for name, path in files.items():
            assert path == huggingface_hub.try_to_load_from_cache(repo_id, name, cache_dir=cache), (repo_id, name)

    env = {k: v for k, v in os.environ.items() if k not in ("HF_HOME", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME")}
    env["HF_HUB_CACHE"] = cache
    failed = []

    def llmctl_run(model, *flags, env=env, cwd=None):
        cmd = [llmctl, "generate", "--model", model, "--temperature", "0", "-n", "8", *flags, PROMPT]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)

    def generate(model, *flags, cwd=None):
        p = llmctl_run(model, *flags, cwd=cwd)
        if p.returncode != 0:
            failed.append(f"{model}: exit {p.returncode}: {p.stderr.strip()}")
            return None, None
        loaded = re.search(r"^llmctl: (.*?) \| ", p.stderr, re.M)
        return p.stdout, loaded.group(1) if loaded else None

    def expect(cond, what):
        print(("ok: " if cond else "FAIL: ") + what)
        if not cond:
            failed.append(what)

    # 1. GGUF by tag (either case) and by file name; the HF directory.
    want_gguf = huggingface_hub.try_to_load_from_cache(GGUF_REPO, GGUF_NAME, cache_dir=cache)
    reference, _ = generate(gguf)
    for ref in (f"{GGUF_REPO}:Q4_1", f"{GGUF_REPO}:q4_1", f"{GGUF_REPO}:{GGUF_NAME}"):
        out, loaded = generate(ref)
        expect(loaded == want_gguf, f"{ref} loads {want_gguf} (loaded {loaded})")
        expect(out is not None and out == reference, f"{ref} generates {reference!r} (got {out!r})")
    want_dir = os.path.dirname(huggingface_hub.try_to_load_from_cache(HF_REPO, "config.json", cache_dir=cache))
    reference, _ = generate(converted)
    out, loaded = generate(HF_REPO)
    expect(loaded == want_dir, f"{HF_REPO} loads the snapshot {want_dir} (loaded {loaded})")
    expect(out is not None and out == reference, f"{HF_REPO} generates {reference!r} (got {out!r})")

    # 2. An existing local path named like a repo wins.
    os.makedirs(os.path.join(tmp, "test-org"))
    os.symlink(converted, os.path.join(tmp, HF_REPO))
    _, loaded = generate(HF_REPO, cwd=tmp)
    expect(loaded == HF_REPO, f"the local directory ./{HF_REPO} wins over the cache (loaded {loaded})")

    # 3. Errors, before any model is loaded.
    def error(ref, *needles, env=env):
        p = llmctl_run(ref, env=env)
        missing = [n for n in needles if n not in p.stderr]
        expect(p.returncode == 1 and not missing, f"{ref}: exit 1 naming {needles} "
               f"(exit {p.returncode}, missing {missing}: {p.stderr.strip()})")
        return p.stderr

    error("test-org/Nope", f"not in the Hugging Face cache ({cache})", "`hf download test-org/Nope`")
    hf_home = os.path.join(tmp, "home_via_hf_home")
    os.makedirs(hf_home)
    env_home = {k: v for k, v in env.items() if k != "HF_HUB_CACHE"}
    env_home["HF_HOME"] = hf_home
    error("test-org/Nope", f"not in the Hugging Face cache ({os.path.join(hf_home, 'hub')})", env=env_home)
    listed = "SmolLM2-135M-Instruct.Q4_1.gguf, SmolLM2-135M-Instruct.Q8_0.gguf"
    msg = error(f"{GGUF_REPO}:Q5_K_M", "no GGUF file matching tag 'Q5_K_M'", listed)
    expect("mmproj" not in msg, "the projector is not offered as a model")
    error(GGUF_REPO, "several GGUF files", listed, f"{GGUF_REPO}:TAG")
    error(f"{GGUF_REPO}:../../x", "nor a valid Hugging Face model reference")

    if failed:
        print(f"FAIL: {len(failed)} check(s):\n  " + "\n  ".join(failed))
        return 1
    print("all hub cache checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
