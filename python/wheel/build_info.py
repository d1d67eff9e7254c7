"""Writes psgd/_build_info.py: the interpreter the extension is built for.

    build_info.py OUT

The extension (_psgd.so) is compiled against python3-dev's headers, which
belong to /usr/bin/python3; this runs under that interpreter and records
its version and path, so that `import psgd` under another one fails with a
message that names it (psgd/__init__.py) and the wheel gets its tag
(python/wheel/wheel.py).
"""

import sys

with open(sys.argv[1], "w") as f:
    f.write('"""Written by python/wheel/build_info.py: do not edit."""\n')
    f.write(f"PYTHON_VERSION = {'%d.%d' % sys.version_info[:2]!r}\n")
    f.write(f"PYTHON = {sys.executable!r}\n")
    f.write(f"IMPLEMENTATION = {sys.implementation.name!r}\n")
