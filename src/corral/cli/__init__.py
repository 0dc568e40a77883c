"""The ``corral`` command. Every verb except ``server`` talks to the API over HTTP."""
