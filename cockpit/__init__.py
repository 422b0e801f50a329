"""r37-cockpit: the operator's cockpit for the R37 DeepSeek-V4.1-Flash deployment on DGX Spark hosts."""

__version__ = "0.1.0"
