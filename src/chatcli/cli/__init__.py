"""The non-interactive front end: one-shot prompts (and, later, `chatcli session …` scripting)."""
