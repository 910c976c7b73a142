"""Red-team regression tests (issue 16): each finding reproduced, and refused (docs/security.md)."""
