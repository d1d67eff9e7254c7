"""python3 -m psgd: the psgd command (psgd/cli.py; the wheel installs it as
`psgd`). With no arguments, what this installation of psgd is: the
package's version and place, the interpreter, whether the extension loads
(importing psgd fails first, naming the interpreter it needs, when it
cannot) and the PyTorch that psgd.torch would use (= psgd info).
"""

import sys

from psgd import cli


def main():
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
