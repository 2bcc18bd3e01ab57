"""The `gpucc` command of a pip-installed package: the binary installed inside it."""
import os
import sys

from . import Error, _native


def main() -> None:
    try:
        path = _native.command()
    except Error as e:
        sys.exit(str(e))
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
