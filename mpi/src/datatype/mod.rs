//! Datatypes: the predefined basic types ([`builtin`]), looked up from their handles.
//!
//! A message of `count` elements of a basic type is `count × size` contiguous bytes, which the
//! Endpoint moves as they are.

pub mod builtin;

pub use builtin::{BUILTIN, Builtin, Class, Kind, lookup, size_of_handle};
