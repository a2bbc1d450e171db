"""Videos of Atari games: the full-size RGB screen at the agent's decision rate (one frame
per agent step), ``.mp4`` through OpenCV's video writer, ``.gif`` through Pillow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlperf.core.errors import UserInputError

VIDEO_FORMATS = (".mp4", ".gif")
ATARI_FPS = 60
"""Frames per second of the Atari console; a video plays at ATARI_FPS / frameskip."""


class VideoWriter:
    """Frames (H, W, 3) RGB uint8 into an .mp4 (OpenCV, streamed) or a .gif (Pillow)."""

    def __init__(self, path: Path, fps: float) -> None:
        self.path = Path(path)
        self.fps = fps
        self.frames = 0
        suffix = self.path.suffix.lower()
        if suffix not in VIDEO_FORMATS:
            raise UserInputError(
                f"video {self.path}: unsupported format {suffix or '(none)'}; use .mp4 or .gif"
            )
        if not self.path.parent.is_dir():
            raise UserInputError(f"video {self.path}: directory {self.path.parent} does not exist")
        self._gif: list[Any] | None = [] if suffix == ".gif" else None
        self._mp4: Any = None

    def add(self, frame: np.ndarray) -> None:
        if self._gif is not None:
            from PIL import Image

            # Palette images: a quarter of the memory of RGB for a long game's frames.
            self._gif.append(Image.fromarray(frame).quantize(colors=128))
        else:
            import cv2

            if self._mp4 is None:
                h, w = frame.shape[:2]
                fourcc = cv2.VideoWriter_fourcc(*"mp4v")
                self._mp4 = cv2.VideoWriter(str(self.path), fourcc, self.fps, (w, h))
                if not self._mp4.isOpened():
                    raise UserInputError(
                        f"video {self.path}: OpenCV cannot write mp4 here; use a .gif path"
                    )
            self._mp4.write(np.ascontiguousarray(frame[..., ::-1]))  # OpenCV wants BGR
        self.frames += 1

    def close(self) -> None:
        if self._gif:
            first, *rest = self._gif
            first.save(
                self.path,
                save_all=True,
                append_images=rest,
                duration=max(int(round(1000 / self.fps)), 20),
                loop=0,
            )
            self._gif = []
        if self._mp4 is not None:
            self._mp4.release()
            self._mp4 = None


class GameVideos:
    """One video per game in a directory (``game-000.mp4``, ``game-001.mp4``, ...), as
    RLlib's rollout ``--video-dir`` wrote one file per episode."""

    def __init__(self, directory: Path, fps: float) -> None:
        self.directory, self.fps = Path(directory), fps
        self.written: list[Path] = []
        self._writer: VideoWriter | None = None

    def add(self, frame: np.ndarray) -> None:
        if self._writer is None:
            path = self.directory / f"game-{len(self.written):03d}.mp4"
            self._writer = VideoWriter(path, self.fps)
        self._writer.add(frame)

    def end_game(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self.written.append(self._writer.path)
            self._writer = None

    def close(self) -> None:
        """The game in progress, if any, is kept as it stands."""
        self.end_game()
