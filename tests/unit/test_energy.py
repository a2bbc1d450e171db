"""RaplReader on fake powercap trees written in tmp_path (this machine has no RAPL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlperf.telemetry import energy
from rlperf.telemetry.energy import RaplReader

MAX_RANGE = 1_000_000_000  # 1 kJ, small so the wrap test is easy to follow


def write_domain(root: Path, name: str, energy_uj: int, max_range: int = MAX_RANGE) -> Path:
    """Create one fake RAPL domain directory like the kernel's."""
    domain = root / name
    domain.mkdir(parents=True, exist_ok=True)
    (domain / "name").write_text("package-0\n")
    (domain / "energy_uj").write_text(f"{energy_uj}\n")
    (domain / "max_energy_range_uj").write_text(f"{max_range}\n")
    return domain


def set_energy(domain: Path, energy_uj: int) -> None:
    """Advance a fake counter."""
    (domain / "energy_uj").write_text(f"{energy_uj}\n")


@pytest.fixture
def two_packages(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Two packages with sub-domains and an mmio duplicate that must all be ignored."""
    root = tmp_path / "powercap"
    pkg0 = write_domain(root, "intel-rapl:0", 5_000_000)
    pkg1 = write_domain(root, "intel-rapl:1", 7_000_000)
    write_domain(root, "intel-rapl:0:0", 123)  # core sub-domain: already inside package 0
    write_domain(root, "intel-rapl-mmio:0", 999)  # second view of package 0
    (root / "intel-rapl").mkdir()  # the control-type directory, not a domain
    return root, pkg0, pkg1


def test_two_packages_summed_since_construction(two_packages: tuple[Path, Path, Path]) -> None:
    root, pkg0, pkg1 = two_packages
    reader = RaplReader(root)
    assert reader.available
    assert reader.num_packages == 2
    assert reader.read_joules() == pytest.approx(0.0)
    set_energy(pkg0, 5_000_000 + 2_000_000)  # +2 J
    set_energy(pkg1, 7_000_000 + 3_500_000)  # +3.5 J
    assert reader.read_joules() == pytest.approx(5.5)
    set_energy(pkg0, 5_000_000 + 4_000_000)  # +2 J more
    assert reader.read_joules() == pytest.approx(7.5)


def test_wrap_around(tmp_path: Path) -> None:
    root = tmp_path / "powercap"
    pkg = write_domain(root, "intel-rapl:0", MAX_RANGE - 1_000_000)  # 1 J below the top
    reader = RaplReader(root)
    set_energy(pkg, 2_000_000)  # wrapped: 1 J to the top, then 2 J from zero
    assert reader.read_joules() == pytest.approx(3.0)
    set_energy(pkg, 3_000_000)
    assert reader.read_joules() == pytest.approx(4.0)


def test_unreadable_counter_gives_none(
    two_packages: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, pkg0, _ = two_packages
    reader = RaplReader(root)
    set_energy(pkg0, 6_000_000)

    real_read = energy._read_int

    def denied(path: Path) -> int:
        # Tests run as root here, where chmod 000 does not stop reads: simulate the
        # root-only energy_uj of Linux >= 5.10 instead.
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(path))
        return real_read(path)

    monkeypatch.setattr(energy, "_read_int", denied)
    assert reader.read_joules() is None
    monkeypatch.setattr(energy, "_read_int", real_read)
    # The failed read lost nothing: the next one covers the whole period.
    assert reader.read_joules() == pytest.approx(1.0)


def test_permission_denied_at_construction_means_unavailable(
    two_packages: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _, _ = two_packages

    def denied(path: Path) -> int:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(energy, "_read_int", denied)
    reader = RaplReader(root)
    assert not reader.available
    assert reader.num_packages == 0
    assert reader.read_joules() is None


def test_garbage_or_directory_counter_gives_none(two_packages: tuple[Path, Path, Path]) -> None:
    root, pkg0, pkg1 = two_packages
    reader = RaplReader(root)
    (pkg0 / "energy_uj").write_text("not a number\n")
    assert reader.read_joules() is None
    set_energy(pkg0, 5_000_000)
    (pkg1 / "energy_uj").unlink()
    (pkg1 / "energy_uj").mkdir()  # reading a directory raises IsADirectoryError
    assert reader.read_joules() is None


def test_missing_root_is_unavailable(tmp_path: Path) -> None:
    reader = RaplReader(tmp_path / "does-not-exist")
    assert not reader.available
    assert reader.read_joules() is None


def test_root_without_packages_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "intel-rapl").mkdir()
    write_domain(tmp_path, "intel-rapl:0:0", 10)  # only a sub-domain, no package
    reader = RaplReader(tmp_path)
    assert not reader.available
    assert reader.read_joules() is None
