"""How the pipeline invokes dbt: the build's arguments, taken from the run's settings (else as configured)."""

from __future__ import annotations

import pytest

from freight_pipeline.config import ON_TIME_TOLERANCE_ENV, MartsSettings
from freight_pipeline.marts.project import BUILD, dbt_build_args


def test_dbt_build_passes_the_tolerance_only_when_it_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ON_TIME_TOLERANCE_ENV, raising=False)
    assert dbt_build_args() == BUILD  # dbt_project.yml's default applies
    monkeypatch.setenv(ON_TIME_TOLERANCE_ENV, "30")
    assert dbt_build_args() == [*BUILD, "--vars", '{"on_time_tolerance_minutes": 30}']
    monkeypatch.setenv(ON_TIME_TOLERANCE_ENV, "half an hour")
    with pytest.raises(ValueError, match=f"{ON_TIME_TOLERANCE_ENV}='half an hour': must be whole minutes"):
        dbt_build_args()
    assert dbt_build_args(MartsSettings(on_time_tolerance_minutes=45)) == [
        *BUILD, "--vars", '{"on_time_tolerance_minutes": 45}']  # the run's settings, whatever the environment
