"""Statistics and models over measured results: confidence intervals, trust
warnings, scalability fits."""


class DictSummary(dict):
    """A summary that is already a JSON-able dict (profile, appscale)."""

    def to_dict(self) -> dict:
        return dict(self)
