"""The chat gateway (issue 18): the Conversation Hub now; its daemon and adapters next."""
