"""Methods of the main paper (non-private reference, DP-SGD, LabelDP-Pro) behind one interface."""
