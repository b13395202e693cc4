"""The test web in a child process, as tests and `hostcrawl demo` run it beside a Scrapy reactor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from crawler.testweb.config import TestWebConfig
from crawler.testweb.server import CONFIG_FILE, SEEDS_FILE

READY_FILE = "testweb-ready.json"
LOG_FILE = "testweb.log"
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.05
# The folder holding the `crawler` package, so the child imports this very checkout.
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class TestWebProcess:
    """Runs `python -m crawler.testweb serve`, waits until it listens; stop() is SIGTERM + wait."""

    __test__ = False  # not a pytest test class despite the name

    def __init__(
        self,
        cfg: TestWebConfig,
        out_dir: str | Path,
        bind: str = "127.0.0.1",
        port: int = 0,
        startup_timeout: float = STARTUP_TIMEOUT_S,
    ) -> None:
        self.cfg = cfg
        self.out_dir = Path(out_dir)
        self.bind = bind
        self.port = port
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._seed_urls: list[str] | None = None

    @property
    def proxy_url(self) -> str:
        return f"http://{self.bind}:{self.port}"

    @property
    def seed_urls(self) -> list[str]:
        """Home pages of all hosts: the seeds.txt the child wrote beside the ground truth."""
        if self._seed_urls is None:
            self._seed_urls = (self.out_dir / SEEDS_FILE).read_text(encoding="utf-8").split()
        return self._seed_urls

    def start(self) -> TestWebProcess:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        ready = self.out_dir / READY_FILE
        ready.unlink(missing_ok=True)
        cfg_path = self.out_dir / CONFIG_FILE
        cfg_path.write_text(self.cfg.to_json() + "\n", encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
        cmd = [
            sys.executable, "-m", "crawler.testweb", "serve",
            "--config", str(cfg_path), "--out", str(self.out_dir), "--bind", self.bind,
            "--port", str(self.port), "--ready-file", str(ready),
        ]  # fmt: skip
        self._log = (self.out_dir / LOG_FILE).open("wb")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_timeout
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (self.out_dir / LOG_FILE).read_text(errors="replace")[-2000:]
                raise RuntimeError(f"test web did not start:\n{tail}")
            time.sleep(POLL_S)
        self.port = int(json.loads(ready.read_text())["port"])
        return self

    def stop(self) -> int | None:
        """SIGTERM and wait (the child flushes its log), kill if it hangs; returns the exit code."""
        code = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            code = self.proc.returncode
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def __enter__(self) -> TestWebProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
