"""The fleet scan (issue 29)."""
