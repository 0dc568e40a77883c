"""Pure logic: no I/O, no framework imports beyond pydantic."""
