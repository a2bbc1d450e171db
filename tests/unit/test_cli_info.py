"""`rlperf models` and `rlperf doctor` print what a user needs to choose a model and a placement."""

import fcntl
import functools
import signal
import subprocess
import sys

from rlperf.cli import main


def test_models_lists_every_model_with_its_parameter_count(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "thesis-1   4x84x84 uint8       2,009,447" in out
    assert "thesis-6   4x168x168 uint8     7,252,327" in out
    assert "nature" in out and "mlp" in out


def test_models_rejects_bad_counts(capsys):
    assert main(["models", "--actions", "0"]) == 2
    assert capsys.readouterr().err.startswith("rlperf: error: ")


def test_doctor_reports_versions_isa_and_placement(capsys, monkeypatch, tmp_path):
    # The learner is timed for real, for a few hundredths of a second per variant instead of
    # three seconds (12 s of the suite); a full timing is the user's `rlperf doctor`.
    from rlperf.core import autoprecision

    short = functools.partial(
        autoprecision.choose_precision, seconds=0.06, cache=tmp_path / "precision.json"
    )
    monkeypatch.setattr(autoprecision, "choose_precision", short)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for section in ("Versions", "CPU", "ISA flags", "GPUs", "Threads", "Recommended placement"):
        assert section in out
    assert "avx512f" in out and "torch" in out
    advice = " ".join(out.split())  # the report wraps its lines
    assert "learner samples/s: fp32 " in advice and "; measured)" in advice


def test_doctor_refuses_both_no_measure_and_remeasure(capsys):
    assert main(["doctor", "--no-measure", "--remeasure"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlperf: error: ") and "--remeasure" in err and "--no-measure" in err
    assert err.count("\n") == 1


def test_output_cut_short_by_its_reader_ends_quietly(tmp_path):
    # `rlperf bench ... --list | head -1`: the reader closes the pipe after the first line,
    # while the listing (200 runs, ~9 KB) is still being written: the pipe holds one page,
    # so the listing cannot have gone into it whole before the close, however busy the machine
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlperf", "bench", "--presets", "atari-fast,cleanrl-atari",
         "--suite", "atari5", "--seeds", "20", "--minutes", "1", "--list",
         "-o", str(tmp_path / "bench")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    fcntl.fcntl(proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, 4096)  # before its imports end
    assert proc.stdout.readline().startswith(b"bench ")
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err[-500:]
    assert proc.returncode == 128 + signal.SIGPIPE
