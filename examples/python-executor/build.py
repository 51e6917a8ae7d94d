"""Builds the executor as one file: python3 build.py OUT.

OUT is a shell launcher followed by a zip of executor.py (as __main__.py)
and gen/. The launcher runs the file with the first python3 that has the
modules it needs, and Python runs the zip appended to it. One file is what
a sha256 pin in a composition covers: every line of the executor's own code
and of its generated modules, the way a pin covers a Go plugin's binary.
The zip is byte-for-byte the same for the same sources (fixed dates and
order), so a pin stays valid across rebuilds.
"""

import io
import os
import stat
import sys
import zipfile

LAUNCHER = b"""#!/bin/sh
# dsh-python-executor: a ctx.shell executor in Python, built by
# examples/python-executor/build.py. What follows the launcher is a zip
# that Python runs; the launcher picks the interpreter: $DSH_PYTHON, then
# python3 on PATH, then /usr/bin/python3 (where Debian's python3-grpcio is).
for py in "$DSH_PYTHON" python3 /usr/bin/python3; do
\t[ -n "$py" ] || continue
\tif "$py" -c 'import grpc, google.protobuf, cryptography' 2>/dev/null; then
\t\texec "$py" "$0" "$@"
\tfi
done
echo "dsh-python-executor: no python3 with grpc, protobuf and cryptography (apt-get install python3-grpcio python3-protobuf python3-cryptography)" >&2
exit 1
"""

EPOCH = (1980, 1, 1, 0, 0, 0)


def sources(here):
    yield os.path.join(here, "executor.py"), "__main__.py"
    gen = os.path.join(here, "gen")
    found = []
    for root, dirs, files in os.walk(gen):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found += [os.path.join(root, f) for f in files if f.endswith(".py")]
    if not found:
        sys.exit("build.py: gen/ holds no modules (run make gen)")
    for path in sorted(found):
        yield path, os.path.relpath(path, here).replace(os.sep, "/")


def packages(names):
    """The __init__.py of each folder under gen/: Python imports no
    namespace package from a zip."""
    dirs = set()
    for name in names:
        parts = name.split("/")[1:-1]  # under gen/, without the file
        for i in range(1, len(parts) + 1):
            dirs.add("gen/" + "/".join(parts[:i]) + "/__init__.py")
    return sorted(dirs)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 build.py OUT")
    out = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    buf = io.BytesIO()
    files = []
    for path, name in sources(here):
        with open(path, "rb") as f:
            files.append((name, f.read()))
    files += [(name, b"") for name in packages(n for n, _ in files if n.startswith("gen/"))]
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            info = zipfile.ZipInfo(name, EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, data)
    # Written beside OUT and renamed: a host starting OUT never sees half a file.
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(LAUNCHER)
        f.write(buf.getvalue())
    os.chmod(tmp, 0o755 | stat.S_IFREG)
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
