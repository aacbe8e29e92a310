#!/usr/bin/env python3
"""Seeded mutation fuzzer of the YAML readers: mutates the shipped config (config/default.yaml)
and the shipped hardware profiles (config/profiles/*.yaml) N times each (KVLANES_YAML_MUTATIONS,
default 300; seed KVLANES_YAML_SEED, default 1) and replays a 30-request trace with each. A
mutation is a byte flip, a cut at any byte, a removed, duplicated or swapped line, a line
re-indented, or a value (a whole scalar, or one number inside a flow map or list) replaced by a
huge, negative, NaN, infinite or fractional number or a value of another type, an alias that
contains itself, nesting past the depth limits, a block size of 2^32 pages or more, a key given
dotted beside its section, a null or list section, or a second document. Each mutated file is
given as a plain path, as a path with a byte that is not UTF-8, or as a FIFO a writer feeds; some
runs also name the report's path for a second output (--requests-csv), which must be refused.

Every run must either succeed (exit 0, the report written) or be refused (exit 2, an error naming
the mutated file and a line or a field, no output file nor its .tmp). A signal, any other exit
code, a run past 60 s, or a refusal that names neither a line nor a field fails; failing inputs
are kept as fail_<kind><N>.yaml in the work directory.

usage: config_and_profile_mutations_are_read_or_refused.py KVLANES SOURCE_DIR WORK_DIR
"""
import collections, glob, os, random, re, shutil, subprocess, sys, threading, time

kvlanes, src, work = sys.argv[1:4]
src = os.path.abspath(src)
count = int(os.environ.get("KVLANES_YAML_MUTATIONS", "300"))
seed = int(os.environ.get("KVLANES_YAML_SEED", "1"))
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
trace = os.path.join(work, "t.jsonl")
with open(trace, "w") as f:
    f.writelines(open(os.path.join(src, "traces/mooncake_excerpt.jsonl")).readlines()[:30])

# The config seed: the shipped default with its profile named by an absolute path (the mutated
# file lives in the work directory). The profile seeds: every shipped profile, each replayed by
# that config with cp_size set to the profile's collective size where it has one.
default_text = open(os.path.join(src, "config/default.yaml")).read()
default_text = default_text.replace(
    "profile: profiles/", "profile: " + os.path.join(src, "config/profiles") + "/")
profiles = sorted(glob.glob(os.path.join(src, "config/profiles/*.yaml")))
profile_texts = [(os.path.basename(p), open(p).read()) for p in profiles]
base_config = os.path.join(work, "base.yaml")
with open(base_config, "w") as f:
    f.write(default_text)

VALUES = ["0", "-1", "1", "2", "-0", "0.5", "-2.5", "1e400", "-1e400", "1e300", "1e-300", "4e9",
          "9223372036854775807", "9223372036854775808", "-9223372036854775809", "18446744073709551616",
          "2147483648", "281474976710656", ".nan", ".NaN", "nan", ".inf", "-.inf", "inf", "0x10",
          "1_000", "true", "false", "~", "null", '""', "''", "x", "[]", "{}", "[1, 2]", "{a: 1}",
          "'1'", "&a 1", "*a", "!!str 3", "!!binary aGk=", "| \n  1", "--- 1", "? a", "%", "@", "`",
          "\"\\u0000\"", "\"\\xff\"", "é", "-", "[", "{", "]", "}",
          # aliases that contain themselves, nesting past the limits, block sizes of 2^32+ pages
          "&a [1, *a]", "&a {k: *a}", "&a [&b [*a], *b]", "[" * 300 + "]" * 300, "{a: " * 300 + "1" + "}" * 300,
          "[" * 3000 + "]" * 3000, "274877906944", "1099511627776", "137438953472", "9e9", "--- {}", "~\n---\n~"]
NUMBER = re.compile(r"(?<![\w.])-?\d+(\.\d+)?([eE][-+]?\d+)?(?![\w.])")
rng = random.Random(seed)


def mutate(text):
    lines = text.split("\n")
    i = rng.randrange(len(lines))
    r = rng.random()
    if r < 0.35:  # a whole scalar value after "key:"
        m = re.match(r"^(\s*-?\s*[\w.]+:)(\s*)(.*)$", lines[i])
        if m:
            lines[i] = m.group(1) + " " + rng.choice(VALUES)
        else:
            lines[i] = lines[i] + " " + rng.choice(VALUES)
    elif r < 0.55:  # one number anywhere (inside flow maps and lists too)
        nums = [m for ln in range(len(lines)) for m in [(ln, x) for x in NUMBER.finditer(lines[ln])]]
        if nums:
            ln, x = rng.choice(nums)
            lines[ln] = lines[ln][: x.start()] + rng.choice(VALUES) + lines[ln][x.end():]
    elif r < 0.63:  # a duplicated line: a key given twice, or a list entry repeated
        lines.insert(i, lines[i])
    elif r < 0.71:  # a removed line: a missing key
        del lines[i]
    elif r < 0.76:  # a swapped pair
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif r < 0.81:  # re-indented: a key moved to another map
        lines[i] = rng.choice(["", "  ", "    ", " ", "\t"]) + lines[i].lstrip()
    elif r < 0.84:  # an unknown key
        lines.insert(i, rng.choice(["", "  ", "    "]) + rng.choice(["bogus", "layers", "name", "gbps"]) + ": 1")
    elif r < 0.86:  # a key given dotted beside its section, a null or list section, a block size,
        # a second document
        lines.insert(i, rng.choice(["cache.cp_size: 0", "cache.page_tokens: 64", "model.layers: 3", "cache:",
                                    "cache: [1]", "device:", "trace:\n  block_tokens: " +
                                    rng.choice(["274877906944", "1099511627776", "64", "4096"]), "---"]))
    out = "\n".join(lines).encode()
    if 0.86 <= r < 0.94 and out:  # a byte changed (to a control byte, YAML syntax or bad UTF-8)
        j = rng.randrange(len(out))
        b = rng.choice([0, 1, 9, 10, 13, 32, 34, 35, 38, 39, 42, 44, 45, 58, 91, 93, 123, 125, 0x7F,
                        0x80, 0xC3, 0xFE, 0xFF, rng.randrange(256)])
        out = out[:j] + bytes([b]) + out[j + 1:]
    elif r >= 0.94 and out:  # cut at any byte (in the middle of a UTF-8 sequence too)
        out = out[: rng.randrange(len(out))]
    return out


def serve_fifo(p, data, stop):
    """Writes `data` to the FIFO `p` each time a reader opens it (a profile is read more than
    once), until `stop` is set."""
    while not stop.is_set():
        try:
            fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.005)
            continue
        os.set_blocking(fd, True)
        try:
            os.write(fd, data)
        except OSError:
            pass
        os.close(fd)
        time.sleep(0.05)  # the reader sees end-of-file and closes before the next open is served


# How the mutated file and the outputs are given, besides the plain path: a path with a byte that
# is not UTF-8 (written into the report escaped), a FIFO that a writer feeds, or the report's path
# given to a second output option (refused before any work, naming both options).
DELIVERIES = ["plain"] * 7 + ["odd_path", "fifo", "duplicate_output"]


def run(kind, n, text, argv_for, mutated_path, delivery="plain"):
    data = text if isinstance(text, bytes) else text.encode()
    if delivery == "odd_path":
        mutated_path = mutated_path.encode()[:-5] + b"\xff.yaml"
    if os.path.lexists(mutated_path):
        os.remove(mutated_path)
    stop = threading.Event()
    feeder = None
    if delivery == "fifo":
        os.mkfifo(mutated_path)
        feeder = threading.Thread(target=serve_fifo, args=(mutated_path, data, stop))
        feeder.start()
    else:
        with open(mutated_path, "wb") as f:
            f.write(data)
    out = os.path.join(work, "out.json")
    for q in (out, out + ".tmp"):
        if os.path.exists(q):
            os.remove(q)
    argv = argv_for(mutated_path, out)
    if delivery == "duplicate_output":
        argv += ["--requests-csv", out]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=60)
    except subprocess.TimeoutExpired:
        return "hang", "no exit within 60 s"
    finally:
        stop.set()
        if feeder:
            feeder.join()
    if isinstance(mutated_path, bytes):
        mutated_path = mutated_path.decode(errors="replace")
    if delivery == "duplicate_output":
        if r.returncode != 2 or "--requests-csv: names the same file as --json" not in r.stderr:
            return "other", f"a duplicate output gave exit {r.returncode}: {r.stderr.strip()[-300:]}"
        if os.path.exists(out) or os.path.exists(out + ".tmp"):
            return "refused", "a duplicate output was refused but left an output file"
        return "refused", None
    if r.returncode == 0:
        return ("executed", None) if os.path.exists(out) else ("executed", "exit 0 without the report")
    if r.returncode == 2:
        err = r.stderr.strip()
        if os.path.exists(out) or os.path.exists(out + ".tmp"):
            return "refused", "refused but left an output file"
        name = os.path.basename(mutated_path)
        # The error names the mutated file, or the other input a mutated value was checked
        # against (the trace, for trace.block_tokens; the profile, for cache.cp_size), as
        # "PATH:LINE: ..." or "PATH: FIELD: ...": a line or a field, or a fault of the whole file
        # that has neither (an empty profile).
        files = [name, os.path.basename(trace)] + [n for n, _ in profile_texts]
        located = [ln for ln in err.splitlines() if any(f + ":" in ln for f in files)]
        if not located:
            return "refused", "the error names no input file: " + err[-300:]
        if not any(re.search(re.escape(f) + r":(\d+: |\s*[\w.\[\]-]+: )", ln) or
                   re.search(re.escape(f) + r": the [\w ]+ is empty", ln)
                   for ln in located for f in files):
            return "refused", "the error names neither a line nor a field: " + located[0][-300:]
        return "refused", None
    return "other", f"exit {r.returncode}: {r.stderr.strip()[-300:]}"


def config_argv(p, out):
    return [kvlanes, "replay", trace, "--config", p, "-q", "--json", out]


def profile_argv_for(text):
    # cache.cp_size the profile's collective size where it has one; model.preset and model.layers
    # the ones its compute terms were measured for.
    m = re.search(r"ranks:\s*(\d+)", text)
    sets = ["--set", f"cache.cp_size={m.group(1) if m else 1}"]
    m = re.search(r"model_preset:\s*\"?([\w.-]+)", text)
    if m:
        sets += ["--set", "model.preset=" + m.group(1)]
    m = re.search(r"^\s*model_layers:\s*(\d+)", text, re.M)
    if m:
        sets += ["--set", "model.layers=" + m.group(1)]

    def argv(p, out):
        return [kvlanes, "replay", trace, "--config", base_config, "--profile", p, "-q", "--json", out] + sets
    return argv


failures = []
summary = []
t0 = time.time()
# The seeds must run as they are, or every mutation's refusal would prove nothing.
cases = [("config", default_text, config_argv)]
cases += [("profile_" + name[:-5], text, profile_argv_for(text)) for name, text in profile_texts]
for kind, text, argv_for in cases:
    outcome, why = run(kind, -1, text, argv_for, os.path.join(work, "seed_" + kind + ".yaml"))
    if outcome != "executed" or why:
        failures.append((kind, -1, f"the unmutated seed does not run: {why or outcome}"))
per_kind = {"config": count, "profile": count}
for family in ("config", "profile"):
    members = [c for c in cases if c[0].startswith(family)]
    outcomes = collections.Counter()
    t = time.time()
    for n in range(per_kind[family]):
        kind, text, argv_for = members[n % len(members)]
        mutated = mutate(text)
        delivery = rng.choice(DELIVERIES) if hasattr(os, "mkfifo") else "plain"
        p = os.path.join(work, "m_" + family + ".yaml")
        outcome, why = run(kind, n, mutated, argv_for, p, delivery)
        outcomes[outcome if delivery == "plain" else outcome + " (" + delivery + ")"] += 1
        if why or outcome in ("hang", "other"):
            failures.append((family, n, f"{why or outcome} [{delivery}]"))
            with open(os.path.join(work, f"fail_{family}{n}.yaml"), "wb") as f:
                f.write(mutated)
    summary.append(f"{family}: {per_kind[family]} mutations in {time.time() - t:.1f} s: " +
                   ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
print(f"seed {seed}: " + "; ".join(summary) + f" ({time.time() - t0:.1f} s in all)")
for family, n, why in failures[:30]:
    print(f"FAIL {family} mutation {n}: {why}" +
          (f" (kept as {work}/fail_{family}{n}.yaml)" if n >= 0 else ""))
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
