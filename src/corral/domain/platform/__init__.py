"""A pool's platform, resolved: pod templates merged and rendered with their variables, resource
rules, node membership, security rules, one task validated, and the checks made on write."""
