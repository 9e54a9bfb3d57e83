"""The interactive front end: a prompt_toolkit REPL over the engine and the command registry."""
