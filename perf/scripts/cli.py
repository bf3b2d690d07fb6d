"""What the perf pack's Python scripts share on their command line: a usage error is one line that
points to --help (argparse's default prints the whole usage before it), and value types that refuse
what the script cannot use."""
import argparse


class ArgumentParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose usage errors are one line: "<prog>: <why> (see <prog> --help)", exit 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def number(minimum, kind=int, above=False):
    """An argparse type: a number of `kind` that is >= minimum (> minimum with above=True)."""
    def parse(text):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a {'whole ' if kind is int else ''}number") from None
        if v < minimum or (above and v == minimum):
            raise argparse.ArgumentTypeError(f"'{text}' must be {'>' if above else '>='} {minimum}")
        return v
    return parse
