"""The image runs the engine release its server was checked against, or the pod stops here.

Usage: python3 -c <this program> <package> <release> <image>
"""

import sys
from importlib.metadata import PackageNotFoundError, version


def check(package, expected, image):
    """The message to stop with, or None when the image runs `expected`."""
    try:
        found = version(package)
    except PackageNotFoundError:
        return f"{image} has no {package} installed; the server was checked against {package} {expected}"
    release = found.split("+", 1)[0]
    if release != expected:
        return (
            f"{image} runs {package} {found}, not {expected}: the server's options and environment "
            f"were checked against {expected}. Run the image of {expected}, or synthesize the stack "
            f"again for an image tagged v{release}"
        )
    return None


def main(argv):
    if len(argv) != 4:
        print("usage: check_engine_release <package> <release> <image>", file=sys.stderr)
        return 2
    problem = check(argv[1], argv[2], argv[3])
    if problem:
        print(problem, file=sys.stderr)
        return 1
    print(f"{argv[1]} {argv[2]}: the release the server was checked against")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
