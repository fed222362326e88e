//! nemesis shared-memory core (work in progress).
