"""Persistence: SQLAlchemy repositories and Alembic migrations (SQLite default, PostgreSQL)."""
