"""Statistics and models over measured results: confidence intervals, trust
warnings, scalability fits."""


class DictSummary(dict):
    """A summary that is already a JSON-able dict (profile, appscale)."""

    def to_dict(self) -> dict:
        return dict(self)

    @property
    def study(self) -> list[dict] | None:
        """A study run's verdicts, kept under `study`."""
        return self.get("study")
