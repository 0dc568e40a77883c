"""Reading and writing values: JSON/YAML documents bounded and located (file:line:col), OSMO's
strategic merge patch, structural diffs, names, durations, Kubernetes names and quantities."""
