#!/usr/bin/env python3
"""Builds the root filesystem of the Dockerfile's final stage without a container engine.

    scripts/image-rootfs.py BINARY ROOT

The final stage must start FROM debian:<suite>-slim: its base is `debootstrap
--variant=minbase <suite>` (what Debian's images are made from), its RUN steps run in a
chroot, and `COPY --from=build /out/netconnectd DEST` copies BINARY (the build stage's
`cargo build` output; any build of the same source will do for testing the image's
contents). ENV, USER, WORKDIR, EXPOSE, VOLUME, LABEL, ENTRYPOINT and CMD are recorded
in ROOT.json, for whoever runs the root filesystem the way an engine would. Any other
instruction is an error.

The root filesystem up to the COPY is cached under /var/cache/ovsdb-rs, keyed by the
stage's text, so only the first build on a machine runs debootstrap and apt-get.
Needs root.
"""

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DOCKERFILE = os.path.join(HERE, "..", "Dockerfile")
CACHE = os.environ.get("OVSDB_RS_CACHE", "/var/cache/ovsdb-rs")


def die(msg):
    print(f"image-rootfs: {msg}", file=sys.stderr)
    sys.exit(1)


def instructions(text):
    """The Dockerfile's instructions as (line number, keyword, arguments), continuation
    lines joined and comments dropped."""
    out, buf, start = [], "", 0
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue
        if not buf:
            start = n
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += stripped
        word, _, rest = buf.partition(" ")
        out.append((start, word.upper(), rest.strip()))
        buf = ""
    if buf:
        die(f"Dockerfile line {start}: the last instruction does not end")
    return out


def final_stage(all_instructions):
    starts = [i for i, (_, w, _) in enumerate(all_instructions) if w == "FROM"]
    if not starts:
        die("the Dockerfile has no FROM")
    return all_instructions[starts[-1]:]


def exec_form(line, args):
    try:
        v = json.loads(args)
    except json.JSONDecodeError:
        v = None
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        die(f"Dockerfile line {line}: give ENTRYPOINT and CMD as JSON arrays of strings")
    return v


def env_pairs(line, args):
    pairs = {}
    for word in shlex.split(args):
        k, eq, v = word.partition("=")
        if not eq:
            die(f"Dockerfile line {line}: ENV takes KEY=VALUE pairs")
        pairs[k] = v
    return pairs


def run(cmd, **kw):
    r = subprocess.run(cmd, **kw)
    if r.returncode != 0:
        die(f"{' '.join(cmd)} failed with exit code {r.returncode}")


def base(stage, key):
    """The cached root filesystem of the stage's FROM and RUN steps."""
    line, _, image = stage[0]
    image = image.split(" AS ")[0].split(" as ")[0].strip()
    name, _, tag = image.partition(":")
    if name != "debian" or not tag.endswith("-slim"):
        die(f"Dockerfile line {line}: the final stage must start FROM debian:<suite>-slim, not {image}")
    suite = tag[: -len("-slim")]
    cached = os.path.join(CACHE, f"image-{key}")
    if os.path.isdir(cached):
        return cached
    os.makedirs(CACHE, exist_ok=True)
    tmp = cached + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    with open(cached + ".log", "w") as log:
        print(f"image-rootfs: debootstrap {suite} (log: {cached}.log)", file=sys.stderr)
        run(["debootstrap", "--variant=minbase", suite, tmp], stdout=log, stderr=log)
        for line, word, args in stage[1:]:
            if word == "RUN":
                print(f"image-rootfs: RUN (line {line})", file=sys.stderr)
                env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                       "DEBIAN_FRONTEND": "noninteractive", "HOME": "/root"}
                run(["chroot", tmp, "/bin/sh", "-c", args], stdout=log, stderr=log, env=env)
    os.rename(tmp, cached)
    # Earlier versions of the stage are not needed any more.
    for old in os.listdir(CACHE):
        path = os.path.join(CACHE, old)
        if old.startswith("image-") and not path.startswith(cached):
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)
    return cached


def main():
    if len(sys.argv) != 3:
        die("usage: image-rootfs.py BINARY ROOT")
    binary, root = sys.argv[1], sys.argv[2]
    if os.geteuid() != 0:
        die("run as root (it uses debootstrap and chroot)")
    if not os.path.isfile(binary):
        die(f"{binary} is not a file")
    with open(DOCKERFILE) as f:
        stage = final_stage(instructions(f.read()))
    key = hashlib.sha256(repr([(w, a) for _, w, a in stage if w in ("FROM", "RUN")]).encode()).hexdigest()[:16]
    config = {"env": {}, "user": "0:0", "workdir": "/", "entrypoint": [], "cmd": [],
              "expose": [], "volumes": [], "labels": {}}
    copies = []
    for line, word, args in stage[1:]:
        if word == "RUN":
            continue
        elif word == "COPY":
            parts = shlex.split(args)
            if len(parts) != 3 or parts[0] != "--from=build" or parts[1] != "/out/netconnectd":
                die(f"Dockerfile line {line}: only COPY --from=build /out/netconnectd DEST is understood")
            copies.append(parts[2])
        elif word == "ENV":
            config["env"].update(env_pairs(line, args))
        elif word == "LABEL":
            config["labels"].update(env_pairs(line, args))
        elif word == "USER":
            config["user"] = args
        elif word == "WORKDIR":
            config["workdir"] = args
        elif word == "EXPOSE":
            config["expose"] += args.split()
        elif word == "VOLUME":
            config["volumes"] += exec_form(line, args)
        elif word == "ENTRYPOINT":
            config["entrypoint"] = exec_form(line, args)
        elif word == "CMD":
            config["cmd"] = exec_form(line, args)
        else:
            die(f"Dockerfile line {line}: {word} is not understood here")
    cached = base(stage, key)
    shutil.rmtree(root, ignore_errors=True)
    run(["cp", "-a", cached, root])
    for dest in copies:
        target = os.path.join(root, dest.lstrip("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(binary, target)
        os.chmod(target, 0o755)
    with open(root + ".json", "w") as f:
        json.dump(config, f, indent=2)
    print(root)


if __name__ == "__main__":
    main()
