//! loom models of the nemesis shared-memory algorithms; built with `--cfg loom`.
