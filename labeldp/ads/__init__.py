"""Ads data with binary labels and users: 000 Table 7 (user-level label DP on Criteo
Attribution) and 002 (Hybrid for semi-sensitive features, Criteo Attribution and pCTR)."""
