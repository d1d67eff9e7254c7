"""python3 -m psgd: what this installation of psgd is.

Prints the package's version and place, the interpreter, whether the
extension loads (importing psgd fails first, naming the interpreter it
needs, when it cannot) and the PyTorch that psgd.torch would use.
"""

import sys

import psgd
from psgd import _build_info


def main():
    print(f"psgd {psgd.__version__} ({psgd.__file__.rsplit('/', 1)[0]})")
    print(f"interpreter: {sys.implementation.name} "
          f"{'%d.%d.%d' % sys.version_info[:3]} ({sys.executable})")
    print(f"extension: loads ({psgd._psgd.__file__}), built for "
          f"{_build_info.IMPLEMENTATION} {_build_info.PYTHON_VERSION}")
    try:
        import torch  # pylint: disable=import-outside-toplevel
        print(f"torch: {torch.__version__} ({torch.__file__.rsplit('/', 1)[0]})"
              f", psgd.torch usable")
    except ImportError as e:
        print(f"torch: none ({e}): psgd.Session works, psgd.torch does not")
    return 0


if __name__ == "__main__":
    sys.exit(main())
