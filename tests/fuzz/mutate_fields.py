#!/usr/bin/env python3
"""Hand-made hostile inputs: every number, string and list of each seed file replaced in turn by each
hostile value, fed to the phaze command that reads that kind of file. Reports how each command exited; any
exit other than 0, 2 or 3 (1 is an internal error, a negative code a signal) or a run over the time limit is
a bug. Usage: tests/fuzz/mutate_fields.py PHAZE [--limit-per-file N [--only TEXT]] (--only: the kinds whose
seed folder or command holds TEXT)"""
import json, os, subprocess, sys, tempfile, collections

HOSTILE = [0, -1, 0.5, 1e308, -1e308, 9223372036854775807, 18446744073709551616, 4294967312, 1e-300,
           "x", "", None, True, [], {}, [1e308], "\u00e9" * 40]

def leaves(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:4]):
            yield from leaves(v, path + (i,))
    if path:
        yield path

def replaced(value, path, new):
    if not path:
        return new
    out = json.loads(json.dumps(value))
    cur = out
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = new
    return out

def main():
    phaze = os.path.abspath(sys.argv[1])
    limit = int(sys.argv[3]) if len(sys.argv) > 3 else 10**9
    only = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--only" else ""
    root = os.path.dirname(os.path.abspath(__file__)) + "/../.."
    kinds = [  # (seed folder, command taking FILE)
        ("tests/data/hf", ["describe", "FILE"]),
        ("tests/data/hf", ["estimate", "FILE", "--device", "h100-sxm", "--devices", "8", "--tp", "1", "--pp", "1",
                           "--global-batch", "8", "--microbatch", "1", "--seq", "2048", "--solver", "list"]),
        ("tests/data/devices", ["devices", "FILE"]),
        ("tests/data/devices", ["estimate", "gpt2", "--device", "FILE", "--devices", "8", "--tp", "1", "--pp",
                                "2", "--global-batch", "16", "--microbatch", "1", "--solver", "list"]),
        ("tests/data/clusters", ["cluster", "FILE"]),
        ("tests/data/clusters", ["plan", "gpt2", "--cluster", "FILE", "--global-batch", "64", "--solver", "list"]),
        ("tests/data/layer_tables", ["plan", "--layer-table", "FILE", "--global-batch", "16"]),
        ("docs/examples", ["search", "--spec", "FILE", "--quiet", "--solver", "list", "--no-baselines",
                           "--out", "OUT"]),
        ("examples/clusters", ["search", "gpt2", "--cluster-space", "FILE", "--global-batch", "64",
                               "--out", "OUT"]),
        ("tests/fuzz/corpus/calibration", ["estimate", "gpt2", "--device", "h100-sxm", "--devices", "8", "--tp",
                                           "1", "--pp", "1", "--global-batch", "8", "--microbatch", "1",
                                           "--calibration", "FILE"]),
    ]
    outcomes = collections.Counter()
    bugs = []
    tried = 0
    with tempfile.TemporaryDirectory() as tmp:
        for folder, command in kinds:
            if only and only not in folder and only not in " ".join(command):
                continue
            d = os.path.join(root, folder)
            for name in sorted(os.listdir(d)):
                if not name.endswith(".json") or name.startswith("bad"):
                    continue
                seed = json.load(open(os.path.join(d, name)))
                done = 0
                for path in leaves(seed):
                    for new in HOSTILE:
                        if done >= limit:
                            break
                        done += 1
                        tried += 1
                        f = os.path.join(tmp, name)
                        json.dump(replaced(seed, path, new), open(f, "w"))
                        args = [a.replace("FILE", f).replace("OUT", os.path.join(tmp, "out")) for a in command]
                        try:
                            r = subprocess.run([phaze] + args, capture_output=True, timeout=60, cwd=d)
                            code = r.returncode
                        except subprocess.TimeoutExpired:
                            code = "timeout"
                        outcomes[(folder + " " + command[0], code)] += 1
                        if code not in (0, 2, 3):
                            bugs.append((folder, name, path, new, code, r.stderr[-300:] if code != "timeout" else b""))
    for (folder, code), n in sorted(outcomes.items(), key=str):
        print(f"{folder:34} exit {code}: {n}")
    print(f"{tried} inputs, {len(bugs)} failures")
    for b in bugs[:40]:
        print(b)
    return 1 if bugs else 0

if __name__ == "__main__":
    sys.exit(main())
