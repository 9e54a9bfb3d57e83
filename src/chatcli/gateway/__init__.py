"""The chat gateway: the Conversation Hub now; its daemon and adapters next."""
