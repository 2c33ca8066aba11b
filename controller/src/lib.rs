//! The retention controller: deletes expired objects and enforces limits (not built yet).
