"""perfmodel: measured, calibrated predictions of deep-learning training time and memory.

Nothing heavy is imported here: torch, mlflow and lightgbm load only inside the functions that
need them, so `import perfmodel` and the CLI start fast.
"""

__version__ = "0.1.0"
