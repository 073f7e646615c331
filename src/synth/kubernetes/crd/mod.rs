//! Custom resource types generated from vendored CRDs.
