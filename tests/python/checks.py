"""What the Python module's test scripts share: `check` prints each result and keeps the
failures, `error_of` returns what a call raised (or None), `finish` prints the count and exits
non-zero when any check failed."""
import sys

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def error_of(call):
    try:
        call()
    except Exception as e:  # the message and type are what is checked
        return e
    return None


def finish():
    print(f"{len(failures)} failed")
    sys.exit(1 if failures else 0)
