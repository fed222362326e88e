//! The launcher: PMI-1 server side and process supervision for `nemesis-run` (in progress).
