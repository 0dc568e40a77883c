"""The server's own processes: the sandbox and its workers that render untrusted templates,
and what every long-running process sets up (logging, GC settings, hardening)."""
