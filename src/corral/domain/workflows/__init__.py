"""Workflows: the file (Jinja sections, strict version-2 model), the plan of a submission,
statuses, group order, exit actions and restarts."""
