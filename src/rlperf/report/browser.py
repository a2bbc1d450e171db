"""Opening a report in headless Chromium: did every image load, did the console stay quiet,
does the page show something?

Chromium is driven through its DevTools protocol over a pipe (``--remote-debugging-pipe``:
JSON messages ended by a NUL byte, commands on the browser's fd 3, replies on its fd 4), so
no WebSocket library and no downloaded browser are needed: the system's ``chromium``
(Debian's package) is enough. Set ``RLPERF_CHROMIUM`` to use another binary.
"""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",  # root in containers and CI; the page is our own file
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-pipe",
)
# Puts the two pipe ends on the fds Chromium expects (3: commands in, 4: replies out), then
# becomes Chromium. Moving them above 10 first avoids clobbering one with the other.
_TRAMPOLINE = (
    "import fcntl, os, sys\n"
    "a = fcntl.fcntl(int(sys.argv[1]), fcntl.F_DUPFD, 10)\n"
    "b = fcntl.fcntl(int(sys.argv[2]), fcntl.F_DUPFD, 10)\n"
    "os.dup2(a, 3); os.dup2(b, 4)\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)


def find_chromium() -> str | None:
    """The Chromium binary to use, or None when none is installed."""
    explicit = os.environ.get("RLPERF_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else shutil.which(explicit)
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    """Chromium could not be started or stopped answering."""


@dataclass
class PageCheck:
    """What the browser saw."""

    url: str
    images: list[dict[str, Any]] = field(default_factory=list)
    """Every <img>: src, complete, naturalWidth."""
    console_errors: list[str] = field(default_factory=list)
    """Console errors, uncaught exceptions, failed loads."""
    screenshot: bytes = b""
    """The viewport as PNG."""
    blank: bool = True
    version: str = ""

    @property
    def broken_images(self) -> list[str]:
        return [
            str(i.get("src")) for i in self.images if not i.get("complete") or not i.get("width")
        ]

    @property
    def ok(self) -> bool:
        return (
            bool(self.images)
            and not self.broken_images
            and not self.console_errors
            and not self.blank
        )

    def describe(self) -> str:
        loaded = len(self.images) - len(self.broken_images)
        return (
            f"{loaded}/{len(self.images)} images loaded, {len(self.console_errors)} console "
            f"error(s), screenshot {'blank' if self.blank else 'not blank'} ({self.version})"
        )


class _Pipe:
    """The DevTools protocol over Chromium's pipe."""

    def __init__(self, proc: subprocess.Popen[bytes], to_browser: int, from_browser: int) -> None:
        self.proc = proc
        self.out = to_browser
        self.inp = from_browser
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> int:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        data = json.dumps(msg).encode() + b"\0"
        while data:
            data = data[os.write(self.out, data) :]
        return self.next_id

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("Chromium did not answer in time")
            ready, _, _ = select.select([self.inp], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(self.inp, 1 << 20)
                if not chunk:
                    raise BrowserError(f"Chromium closed its pipe (exit code {self.proc.poll()})")
                self.buffer += chunk
        raw, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(raw)

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        wanted = self.send(method, params, session)
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read(deadline)
            if msg.get("id") == wanted:
                if "error" in msg:
                    raise BrowserError(f"{method}: {msg['error'].get('message')}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, name: str, timeout: float = 30.0) -> dict[str, Any]:
        for event in self.events:
            if event["method"] == name:
                return event
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read(deadline)
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == name:
                    return msg

    def drain(self, seconds: float) -> None:
        """Collect events for a moment (late console messages)."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                msg = self._read(deadline)
                if "method" in msg:
                    self.events.append(msg)
        except BrowserError:
            pass


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        method = e["method"]
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            args = " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", [])
            )
            out.append(f"console.{p['type']}: {args}")
        elif method == "Runtime.exceptionThrown":
            details = p.get("exceptionDetails", {})
            out.append(
                f"exception: {details.get('exception', {}).get('description') or details.get('text')}"
            )
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            entry = p["entry"]
            out.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
        elif method == "Network.loadingFailed" and not p.get("canceled"):
            out.append(f"load failed: {p.get('errorText')} ({p.get('type')})")
    return out


def is_blank(png: bytes) -> bool:
    """Whether a screenshot shows (almost) one colour: under 0.5% of pixels differ from the
    most common one."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        gray = img.convert("L")
        hist = gray.histogram()
        total = sum(hist)
    return total == 0 or (total - max(hist)) / total < 0.005


def check_page(
    index: Path,
    *,
    chromium: str | None = None,
    width: int = 1280,
    height: int = 1000,
    timeout: float = 60.0,
) -> PageCheck:
    """Load ``index`` (an HTML file) in headless Chromium and report what it saw."""
    binary = chromium or find_chromium()
    if binary is None:
        raise BrowserError(
            "no Chromium found (install Debian's chromium package or set RLPERF_CHROMIUM)"
        )
    url = Path(index).resolve().as_uri()
    to_r, to_w = os.pipe()
    from_r, from_w = os.pipe()
    with tempfile.TemporaryDirectory(prefix="rlperf-chromium-") as profile:
        argv = [
            sys.executable,
            "-c",
            _TRAMPOLINE,
            str(to_r),
            str(from_w),
            binary,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        proc = subprocess.Popen(
            argv,
            pass_fds=(to_r, from_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(to_r)
        os.close(from_w)
        for fd in (to_w, from_r):
            fcntl.fcntl(fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
        pipe = _Pipe(proc, to_w, from_r)
        try:
            return _inspect(pipe, url, width, height, timeout)
        finally:
            try:
                pipe.send("Browser.close")
                proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            os.close(to_w)
            os.close(from_r)


def _inspect(pipe: _Pipe, url: str, width: int, height: int, timeout: float) -> PageCheck:
    version = pipe.call("Browser.getVersion", timeout=timeout).get("product", "")
    target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        pipe.call(f"{domain}.enable", session=session)
    pipe.call(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        session=session,
    )
    pipe.events.clear()
    pipe.call("Page.navigate", {"url": url}, session=session)
    pipe.wait_event("Page.loadEventFired", timeout=timeout)
    pipe.drain(0.5)
    expr = (
        "JSON.stringify(Array.from(document.images).map(i => "
        "({src: i.getAttribute('src'), complete: i.complete, width: i.naturalWidth})))"
    )
    value = pipe.call(
        "Runtime.evaluate", {"expression": expr, "returnByValue": True}, session=session
    )
    images = json.loads(value.get("result", {}).get("value") or "[]")
    shot = pipe.call("Page.captureScreenshot", {"format": "png"}, session=session, timeout=timeout)
    png = base64.b64decode(shot["data"])
    return PageCheck(
        url=url,
        images=images,
        console_errors=_errors(pipe.events),
        screenshot=png,
        blank=is_blank(png),
        version=version,
    )


def check_in_browser(index: Path, say: Callable[[str], None]) -> int:
    """Open a report page in headless Chromium where one is installed: 1 when the page does
    not render, else 0 (no Chromium, or the check could not be done, is said, not failed)."""
    if find_chromium() is None:
        say("browser check: skipped (no Chromium installed)")
        return 0
    try:
        check = check_page(index)
    except BrowserError as exc:
        say(f"browser check: not done: {exc}")
        return 0
    say(f"browser check: {check.describe()}")
    return 0 if check.ok else 1
