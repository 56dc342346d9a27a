"""perfkit: performance investigation workbook for PyTorch training."""
__version__ = "0.1.0"
