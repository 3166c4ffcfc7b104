"""The speedup-vs-AL model: fit (pure), calibration files, the calibration run, screening."""
