"""What an API token looks like: the prefix that tells it from a signed (JWT) token."""

TOKEN_PREFIX = "corral_"
