"""What the end-to-end test scripts share: their arguments (KVLANES SOURCE_DIR WORK_DIR), a work
folder made afresh, checks that print one "ok"/"FAIL" line each, and an exit code that fails the
test when any check failed (CTest reads the code).

    from script_checks import check, finish, start
    kvlanes, src, work = start()
    check(condition, "what was checked")
    finish()
"""
import os, shutil, sys

failures = []


def start():
    """The script's three arguments; WORK_DIR removed and made again, empty."""
    if len(sys.argv) < 4:
        sys.exit(f"usage: {os.path.basename(sys.argv[0])} KVLANES SOURCE_DIR WORK_DIR")
    kvlanes, src, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    return kvlanes, src, work


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def finish():
    """Prints the count of failed checks and exits 1 when there are any, else 0."""
    print(f"{len(failures)} failure(s)")
    sys.exit(1 if failures else 0)
