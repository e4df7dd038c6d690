"""Runs a server command and stops it when the job process that started it is gone.

    python -m aes.cluster.guard PARENT_PID -- COMMAND ...

The job starts every server through this guard, as the leader of a new process group that also
holds the server: stopping the group (SIGTERM, then SIGKILL) stops both. A job that ends without
its teardown (``kill -9``, an out-of-memory kill) leaves no server behind: the guard sees its
parent change and stops the server itself. The guard exits with the server's status.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

GRACE_SEC = 15.0
POLL_SEC = 0.5


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m aes.cluster.guard PARENT_PID -- COMMAND ...", file=sys.stderr)
        return 2
    parent = int(argv[0])
    child = subprocess.Popen(argv[2:])
    stopping = False

    def on_signal(signum, _frame):
        nonlocal stopping
        stopping = True
        if child.poll() is None:
            child.send_signal(signum)  # also sent to the group; repeated for a kill of the guard alone

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    while True:
        try:
            return child.wait(POLL_SEC)
        except subprocess.TimeoutExpired:
            pass
        if not stopping and os.getppid() != parent:  # the job is gone without stopping us
            stopping = True
            child.terminate()
            try:
                return child.wait(GRACE_SEC)
            except subprocess.TimeoutExpired:
                child.kill()
                return child.wait()
        time.sleep(0)


if __name__ == "__main__":
    sys.exit(main())
