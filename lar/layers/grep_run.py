"""One ripgrep run for the ``grep`` layer, on a worker thread (blocking ``subprocess``).

Spawning and reading through asyncio's subprocess transport cost ~5 ms of CPU per run on the
event loop (the transport, its pipe protocols and the child watcher's thread), against ~1-2 ms
for a plain ``Popen`` read on a thread; the ranking that follows runs on that same thread, so
the loop stays free for the other layers of a call. The run stops at ``stop_at`` (the caller
arms a timer that calls :meth:`RgRun.kill`) or after ``max_output`` bytes.
"""
from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class RgOutput:
    """What one run produced: its output, whether it was killed (deadline, cancellation or the
    output cap), whether the cap stopped it, its return code and (on a refusal) its stderr."""

    out: bytes
    killed: bool
    capped: bool
    returncode: int | None
    stderr: bytes = b""


class RgRun:
    """A ripgrep process started by :meth:`run` (blocking); :meth:`kill` from any thread."""

    def __init__(self, cmd: list[str], cwd: str, max_output: int):
        self.cmd, self.cwd, self.max_output = cmd, cwd, max_output
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._killed = False

    def kill(self) -> None:
        with self._lock:
            proc = self._proc
            if proc is not None and proc.returncode is not None:
                return  # it ended (and was reaped) first: its output is whole
            self._killed = True  # also before the start: run() then ends at once
        if proc is not None:
            try:
                proc.kill()
            except OSError:  # already gone
                pass

    def run(self) -> RgOutput:
        with self._lock:
            if self._killed:
                return RgOutput(b"", True, False, None)
            proc = self._proc = subprocess.Popen(self.cmd, cwd=self.cwd, stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE)
        chunks: list[bytes] = []
        size, capped = 0, False
        try:
            while True:
                chunk = proc.stdout.read1(1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > self.max_output:
                    capped = True
                    self.kill()
                    break
            proc.wait()
            err = b"" if (self._killed or chunks or proc.returncode != 2) else proc.stderr.read()
        finally:
            if proc.returncode is None:
                self.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        return RgOutput(b"".join(chunks), self._killed, capped, proc.returncode, err)
