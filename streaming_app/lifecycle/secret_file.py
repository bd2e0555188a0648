"""Reading a secret file safely: one open that neither waits nor reads a device, then checks.

Standard library only, so that Spark's daemons can run it before anything else is
importable: the app reads `spark_secret_file` with it (lifecycle/spark_secret.py), and
conf/secure/spark-env.sh runs `python -m streaming_app.lifecycle.secret_file PATH` for the
master and the workers, which prints the secret on stdout or one line on stderr (exit 2).
A name checked and then opened again could be a FIFO by the time of the open (the open
would wait for a writer for ever) or a device: here the file is opened once, without
waiting, and everything is checked on what was opened.
"""

from __future__ import annotations

import os
import stat
import sys

# The secret is the file's first line: what is read of it at most.
MOST_BYTES = 64 * 1024
# Trimmed from both ends of that line: the shell's [:space:].
SPACES = " \t\r\v\f"


class SecretFileError(Exception):
    """Why the file is refused (the reason only; the caller names the setting)."""


def read_secret(path: str, runs_as: str = "the app") -> str:
    """The secret in `path`: its first line without the spaces around it. The file must be
    a regular file of the user this process runs as (`runs_as` names it in the reason)
    that neither group nor others may read or write. A symbolic link is followed, and the
    checks apply to the file it names (Kubernetes mounts its secrets through links)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise SecretFileError(f"cannot read it ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SecretFileError("not a regular file")
        if info.st_uid != os.geteuid():
            raise SecretFileError(
                f"owned by uid {info.st_uid}, not by the user {runs_as} runs as (uid "
                f"{os.geteuid()}); chown it to the service user"
            )
        if info.st_mode & 0o077:
            raise SecretFileError(
                f"readable or writable by others (mode {stat.S_IMODE(info.st_mode):04o}); "
                "chmod 600 it, as the service user"
            )
        head = os.read(fd, MOST_BYTES)
    except OSError as exc:
        raise SecretFileError(f"cannot read it ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(head) == MOST_BYTES and b"\n" not in head:
        raise SecretFileError(f"its first line is over {MOST_BYTES} bytes")
    try:
        secret = head.split(b"\n", 1)[0].decode("utf-8").strip(SPACES)
    except UnicodeDecodeError:
        raise SecretFileError("not UTF-8 text") from None
    if not secret:
        raise SecretFileError("empty, or its first line blank")
    return secret


def main(argv: list[str]) -> int:
    """For spark-env.sh: the secret of argv[0] on stdout (no newline), or one line naming
    STREAMING_APP_SPARK_SECRET_FILE on stderr and exit 2."""
    if len(argv) != 1:
        print("usage: python -m streaming_app.lifecycle.secret_file PATH", file=sys.stderr)
        return 2
    try:
        secret = read_secret(argv[0], runs_as="the daemon")
    except SecretFileError as exc:
        print(f"spark-env.sh: STREAMING_APP_SPARK_SECRET_FILE {argv[0]}: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(secret)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
