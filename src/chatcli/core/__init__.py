"""Pure values and rules: messages, errors, redaction, prompt composition. No I/O."""
