//! reqwest as the stack's HTTP client (feature `reqwest`).
