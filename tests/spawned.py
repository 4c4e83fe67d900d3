"""Commands asked of a real command spawner (lib/spawner_client.py) by the process tests (their
``spawner`` fixture: tests/process/conftest.py): a command and the read end of its output, its end."""

import os

#: A command that double-forks a grandchild into a session of its own, then sleeps.
ESCAPER = """import os, sys, time
pids = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open(pids + '.grandchild', 'w').write(str(os.getpid()))
        time.sleep(120)
    os._exit(0)
open(pids + '.command', 'w').write(str(os.getpid()))
time.sleep(120)
"""


def spawn(spawner, argv, *, env=None, nice=0, grace=1.0, cwd="/"):
    """Ask ``spawner`` for ``argv``; returns the command and the read end of its output (stdout and stderr)."""
    read, write = os.pipe()
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        command = spawner.spawn(argv, env=env or {}, cwd=cwd, nice=nice, grace=grace, stdio=(devnull, write, write))
    finally:
        os.close(write)
        os.close(devnull)
    return command, os.fdopen(read, "rb")


def finish(command, output, timeout=10):
    """The command's status lines and its output, once it has ended (within ``timeout`` seconds)."""
    assert command.wait(timeout)
    with output:
        return command.lines, output.read().decode()
