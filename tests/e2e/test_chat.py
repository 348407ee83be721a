#!/usr/bin/env python3
"""`llmctl chat` (default model, greedy), driven through a pseudo-terminal and through a pipe:

1. terminal: two turns, the second served partly from the prefix cache (the first turn's KV reused);
   /clear, after which the hits fall back to what the system part of the template explains; an
   empty line and Ctrl-C at the prompt get a hint; Ctrl-D at the prompt exits 0.
2. terminal: Ctrl-C while a long reply streams stops it, the prompt comes back within seconds, the
   next turn works (and reuses the interrupted reply's KV); Ctrl-D exits 0.
3. pipe: one reply per input line on stdout, exit 0; the first equals `generate --chat`'s text.
   A line that is not UTF-8 is refused with a message (exit 1), the others still answered.
Usage: test_chat.py BUILD_DIR [LLMCTL FLAGS...]
"""
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import time

build = sys.argv[1]
extra = sys.argv[2:]
llmctl = os.path.join(build, "llmctl")
home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
# The default model (used without --model): skip rather than fetch it.
model = os.path.join(home, "models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf")
if not os.access(llmctl, os.X_OK) or not os.path.exists(model):
    print(f"SKIP: {llmctl} or the default model {model} not found")
    sys.exit(77)

STATS = re.compile(r"llmctl: prompt (\d+) tokens \((\d+) from the prefix cache\).*?generated (\d+) tokens.*?finish (\w+)")
failed = False


def check(cond, what):
    global failed
    print(("ok: " if cond else "FAIL: ") + what)
    if not cond:
        failed = True


class Pty:
    """llmctl under a pseudo-terminal: stdin, stdout and stderr are the terminal."""

    def __init__(self, *args):
        env = dict(os.environ, TERM=os.environ.get("TERM", "xterm"))
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execve(llmctl, [llmctl, "chat", *extra, *args], env)
        self.buf = ""
        self.pos = 0  # expect() searches from here

    def read_some(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.fd, 4096)
        except OSError:  # EIO: the child closed the terminal
            return None
        if not data:
            return None
        self.buf += data.decode("utf-8", errors="replace")
        return True

    def expect(self, pattern, timeout=120):
        """Waits for the regex after the last match; returns the match (exits the test on timeout)."""
        rx = re.compile(pattern)
        end = time.time() + timeout
        while True:
            m = rx.search(self.buf, self.pos)
            if m:
                self.pos = m.end()
                return m
            left = end - time.time()
            if left <= 0 or self.read_some(min(left, 0.2)) is None and not rx.search(self.buf, self.pos):
                print(f"FAIL: {pattern!r} not seen in {timeout}s; terminal output:\n{self.buf}")
                self.kill()
                sys.exit(1)

    def send(self, text):
        os.write(self.fd, text.encode())

    def send_eof(self, timeout=10):
        """Ctrl-D once line editing holds the terminal (ICANON off): typed ahead, while the terminal
        is still in canonical mode, the line discipline would take it as an end of file that is lost
        when line editing switches the mode (a person sees the prompt first). Without line editing
        (a build without libedit) the mode never changes, and it is sent after the timeout."""
        end = time.time() + timeout
        while time.time() < end and termios.tcgetattr(self.fd)[3] & termios.ICANON:
            self.read_some(0.05)
        self.send("\x04")

    def turn(self, text, timeout=120):
        """Sends a line; returns (prompt tokens, prefix-cache hits, generated tokens, finish reason, reply)."""
        start = self.pos
        self.send(text + "\r")
        m = self.expect(STATS.pattern, timeout)
        reply = self.buf[start:m.start()].replace("\r\n", "\n")
        # The line's echo: twice when it was typed before libedit took the terminal (the terminal's
        # own echo, then libedit's).
        while reply.startswith(text + "\n"):
            reply = reply[len(text) + 1:]
        reply = reply[:-1] if reply.endswith("\n") else reply  # the newline ending every reply
        self.expect(r"> ")
        return int(m[1]), int(m[2]), int(m[3]), m[4], reply

    def wait(self, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            self.read_some(0.2)  # keep draining so the child never blocks on a full terminal
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
        self.kill()
        return None

    def kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass


def pipe_chat(text, *flags):
    p = subprocess.run([llmctl, "chat", *extra, "--temperature", "0", *flags], input=text.encode(),
                       capture_output=True, timeout=600)
    return p.returncode, p.stdout.decode(), p.stderr.decode(errors="replace")


# 1. Two turns, /clear, hints, Ctrl-D.
t = Pty("--temperature", "0", "-n", "24")
t.expect(r"Ctrl-D quits", timeout=300)
t.expect(r"> ")
p1, hit1, n1, f1, r1 = t.turn("Hi")
print(f"turn 1: prompt {p1} tokens, {hit1} from the prefix cache, {n1} generated, finish {f1}")
p2, hit2, n2, f2, _ = t.turn("Tell me about the sea.")
print(f"turn 2: prompt {p2} tokens, {hit2} from the prefix cache, {n2} generated, finish {f2}")
check(hit1 == 0, f"turn 1 starts from an empty cache (hits {hit1})")
check(p2 > p1 + n1 // 2, f"turn 2's prompt holds turn 1 ({p2} > {p1} + reply)")
check(hit2 > 0, f"turn 2 reuses turn 1's KV: {hit2} prefix-cache hits")
# Every full 16-token block of turn 1's prompt is found again (its reply's blocks may be too).
check(hit2 >= 16 * (p1 // 16), f"turn 2's hits ({hit2}) cover turn 1's full prompt blocks ({16 * (p1 // 16)})")

t.send("/clear\r")
t.expect(r"conversation cleared")
t.expect(r"> ")
# Not ASCII: libedit must pass it through (a UTF-8 locale) for the reply to equal a pipe's.
after_clear = "Name a color, en français s'il te plaît. Café?"
p3, hit3, n3, f3, r3 = t.turn(after_clear)
print(f"after /clear: prompt {p3} tokens, {hit3} from the prefix cache, {n3} generated, finish {f3}")
check(p3 < p2, f"after /clear the prompt is one turn again ({p3} < {p2})")
# Turn 1's and this prompt share only the template's system part and the user header: the hits are
# whole blocks of it, short of turn 1's prompt less its message and the assistant header.
check(hit3 < hit2 and hit3 <= p1 - 5 and hit3 % 16 == 0,
      f"after /clear the hits ({hit3}) are the system part's blocks at most (turn 1 prompt {p1}, turn 2 hits {hit2})")
rc, out, _ = pipe_chat("Hi\n", "-n", "24")
check(rc == 0 and r1 + "\n" == out, f"the terminal's first reply equals a pipe's ({r1!r})")
rc, out, _ = pipe_chat(after_clear + "\n", "-n", "24")
check(rc == 0 and r3 + "\n" == out, f"after /clear, the reply equals a fresh chat's ({r3!r})")

t.send("\r")
t.expect(r"empty message")
t.expect(r"> ")
t.send("\x03")
t.expect(r"Ctrl-D quits")
t.expect(r"> ")
check(True, "an empty line and Ctrl-C at the prompt give hints")
t.send_eof()
rc = t.wait()
check(rc == 0, f"Ctrl-D at the prompt exits 0 (exit {rc})")

# 2. Ctrl-C in the middle of a long reply.
t = Pty("--temperature", "0", "-n", "400", "--ignore-eos")
t.expect(r"Ctrl-D quits", timeout=300)
t.expect(r"> ")
t.send("Write a long story about a dragon.\r")
t.expect(r"dragon\.\r?\n")  # the echo of the line
start = len(t.buf)
end = time.time() + 120
while len(t.buf) - start < 60 and time.time() < end:  # some of the reply streamed
    t.read_some(0.2)
t.send("\x03")
sent = time.time()
m = t.expect(STATS.pattern, timeout=30)
t.expect(r"> ", timeout=30)
took = time.time() - sent
print(f"interrupted reply: {m[3]} tokens, finish {m[4]}, prompt back {took:.3f} s after Ctrl-C")
check(m[4] == "abort" and int(m[3]) < 400, f"Ctrl-C stops the reply (finish {m[4]}, {m[3]} of 400 tokens)")
check(took < 5, f"the prompt is back within 5 s ({took:.2f} s)")
p5, hit5, n5, f5, _ = t.turn("Thanks. Now say hi.", timeout=300)
print(f"turn after Ctrl-C: prompt {p5} tokens, {hit5} from the prefix cache, {n5} generated, finish {f5}")
check(f5 == "length" and n5 == 400, f"the next turn works ({n5} tokens, finish {f5})")
check(p5 > int(m[1]) + int(m[3]), f"the interrupted reply is kept in the history ({p5} > {m[1]} + {m[3]} tokens)")
check(hit5 >= 16 * (int(m[1]) // 16), f"the next turn reuses the first turn's KV ({hit5} hits)")
t.send_eof()
rc = t.wait()
check(rc == 0, f"Ctrl-D exits 0 (exit {rc})")

# 3. Not a terminal: one reply per line.
chat = [llmctl, "chat", *extra, "--temperature", "0", "-n", "16"]
p = subprocess.run(chat, input=b"Hi\nName a color.\n", capture_output=True, timeout=600)
out, err = p.stdout.decode(), p.stderr.decode()
stats = STATS.findall(err)
print(f"pipe: exit {p.returncode}, stdout {out!r}")
print(err.strip())
check(p.returncode == 0 and len(stats) == 2, f"two turns through a pipe, exit 0 ({len(stats)} turns, exit {p.returncode})")
check("> " not in out and out.endswith("\n"), "no prompt on stdout; the replies end with a newline")
g = subprocess.run([llmctl, "generate", *extra, "--chat", "--temperature", "0", "-n", "16", "Hi"],
                   capture_output=True, timeout=600)
gen = g.stdout.decode()
check(g.returncode == 0 and gen.strip() and out.startswith(gen),
      f"the first reply equals generate --chat's ({gen!r})")

p = subprocess.run(chat, input=b"\xff\xfe\n\nHi\n", capture_output=True, timeout=600)
err = p.stderr.decode(errors="replace")
check(p.returncode == 1 and "not valid UTF-8" in err and len(STATS.findall(err)) == 1 and p.stdout.decode() == gen,
      f"a line that is not UTF-8 is refused, the next answered (exit {p.returncode})")

# 4. A conversation outgrowing the context (-c 128): its oldest turns are dropped; a message that
# does not fit alone is refused, and the next one answered.
lines = ["Hi", "Tell me about the sea.", "And the sky?", "And the land?", "word " * 200, "Bye."]
p = subprocess.run([llmctl, "chat", *extra, "--temperature", "0", "-n", "32", "-c", "128"],
                   input="\n".join(lines).encode() + b"\n", capture_output=True, timeout=600)
err = p.stderr.decode()
stats = STATS.findall(err)
print(err.strip())
check(p.returncode == 1 and len(stats) == 5 and all(int(s[0]) + 32 <= 128 for s in stats),
      f"every prompt fits the 128-token context ({[int(s[0]) for s in stats]}), exit {p.returncode}")
check(re.search(r"dropped the \d+ oldest turns? to fit the context", err) is not None, "the oldest turns are dropped")
check("does not fit" in err, "a message longer than the context is refused")

print("FAILED" if failed else "PASSED")
sys.exit(1 if failed else 0)
