"""The configuration: pydantic models of every config type, the type registry and document
shapes, cross-item references, bundles and the initial configuration."""
