//! The admission webhook: validates retention settings and stamps schedules (not built yet).
