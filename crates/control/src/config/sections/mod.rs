//! One reader per config section. Each turns a spanned table into a model
//! value, reporting every problem it sees; an item with an error is left
//! out (`None`) so later cross-checks do not pile follow-up errors on it.

pub(crate) mod connection;
pub(crate) mod dataplane;
pub(crate) mod gateway;
pub(crate) mod network;
pub(crate) mod policy;
pub(crate) mod tunnel;

/// A model item with the key path it was read from (`tunnel[2]`), so
/// cross-checks can point at it.
pub(crate) struct Located<T> {
    pub item: T,
    pub path: String,
}
