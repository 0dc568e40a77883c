"""Who is calling: OpenID Connect tokens and sign-ins, sessions, and tasks' own tokens."""
