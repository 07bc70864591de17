"""labeldp: label differential privacy library (mechanisms, accounting, DP-SGD, LabelDP-Pro)."""

__version__ = "0.1.0"
