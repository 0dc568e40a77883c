"""Jinja, sandboxed: rendering template values (typed, bounded, errors naming variable and
template) and syntax checks."""
