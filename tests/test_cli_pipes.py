"""Every entry point ends quietly when its reader closes the pipe early (``... | head``):
status 0, no ``BrokenPipeError`` traceback on stderr."""
import os
import subprocess
import sys

import pytest

CASE = ["--mesh", "x=2,y=4", "--src", "[1024{y}, 512, 256{x}]", "--dst", "[1024, 512{x,y}, 256]"]


@pytest.mark.parametrize("argv", [
    ["-m", "synth", "plan", *CASE, "--json"],
    ["-m", "simulator", "run", "--hardware", "dgx-h100:1", *CASE, "--json"],
])
def test_a_closed_pipe_ends_the_command_quietly(argv):
    # the reader is gone before the command writes (like `| head -c 0`): every write fails
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        p = subprocess.run([sys.executable, *argv], stdout=write_end, stderr=subprocess.PIPE,
                           timeout=300)
    finally:
        os.close(write_end)
    err = p.stderr.decode()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert p.returncode == 0


def test_a_user_error_still_exits_2_with_one_line():
    p = subprocess.run([sys.executable, "-m", "synth", "plan", "--mesh", "x=2", "--src", "[3{q}]",
                        "--dst", "[3]"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: ") and "'q'" in p.stderr
