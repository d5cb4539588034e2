"""The version of oslens, at the bottom so that any module may say it
(collectors.software records it with every run) without importing the
package's API. pyproject.toml carries the same number."""

__version__ = "0.1.0"
