"""`rlperf models` and `rlperf doctor` print what a user needs to choose a model and a placement."""

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


def test_doctor_reports_versions_isa_and_placement(capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    for section in ("Versions", "CPU", "ISA flags", "GPUs", "Threads", "Recommended placement"):
        assert section in out
    assert "avx512f" in out and "torch" in out
