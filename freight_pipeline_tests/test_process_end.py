"""``process_end.exit_now``: a program's end as the interpreter's exit, without its teardown."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

PROGRAM = textwrap.dedent("""
    import atexit, sys, tempfile, threading, time
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path
    from freight_pipeline.process_end import exit_now

    out = Path(sys.argv[1])
    atexit.register(lambda: (out / "atexit").write_text("ran"))
    def late() -> None:
        time.sleep(0.5)
        (out / "thread").write_text("joined")
    threading.Thread(target=late).start()  # not a daemon: awaited, as the interpreter's exit awaits it
    idle = ThreadPoolExecutor(2)  # never shut down: its workers are told to stop, or the exit would hang
    idle.submit(lambda: None).result()
    kept = tempfile.TemporaryDirectory(dir=out)  # never cleaned up: its finalizer runs at exit
    (out / "temporary").write_text(kept.name)

    class Cycle:
        def __del__(self) -> None:  # the teardown's garbage collection would call it
            (out / "collected").write_text("torn down")
    cycle = Cycle()
    cycle.me = cycle
    print("the last line, never flushed", end="")
    sys.stderr.write("said on stderr")
    exit_now(3)
""")


def test_exit_now_ends_as_the_interpreter_would_but_without_its_teardown(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 3, done.stderr
    assert (done.stdout, done.stderr) == ("the last line, never flushed", "said on stderr")
    assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "thread").read_text() == "joined"
    assert not Path((tmp_path / "temporary").read_text()).exists()
    assert not (tmp_path / "collected").exists()  # the teardown left out; a plain exit writes it (below)


def test_without_it_the_same_program_is_torn_down(tmp_path: Path) -> None:
    """The control of the test above: the cycle's ``__del__`` is the teardown's work, which ``exit_now`` skips."""
    program = PROGRAM.replace("exit_now(3)", "sys.exit(3)")
    done = subprocess.run([sys.executable, "-c", program, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 3, done.stderr
    assert (tmp_path / "collected").read_text() == "torn down"
