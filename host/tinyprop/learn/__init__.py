"""tinyprop learn: a board learns from its own camera (firmware/apps/learn). camera: the virtual
camera's frames and label scripts; run: the learn app on a board tinyprop starts, as run log
events, and its run replayed on the host."""
