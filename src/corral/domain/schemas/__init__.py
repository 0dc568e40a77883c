"""The Kubernetes object schemas: core kinds and the vendored CRDs, partial objects (templates)
against them, and the table of non-text fields that typed rendering uses."""
