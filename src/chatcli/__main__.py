"""Allows `python -m chatcli`."""

from chatcli.main import main

raise SystemExit(main())
