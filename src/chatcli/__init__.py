"""chatcli: a terminal client for large language models built around durable sessions."""

__version__ = "0.1.0"
