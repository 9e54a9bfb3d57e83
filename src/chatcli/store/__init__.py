"""Disk adapters: atomic files, prompt history, bootstrap files (and later sessions and journals)."""
