//! How the API server answered a DELETE, when it did not fail: the object deleted, already gone,
//! or refused by a precondition — the last two are outcomes to act on, not errors.

/// A DELETE's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    Deleted,
    /// Already gone (404).
    Gone,
    /// A precondition refused (409, or 412): a namesake, or a change since it was read.
    Refused,
}

impl Sent {
    /// The answer of a DELETE's `result`; any other error stays one.
    pub fn of<T>(result: kube::Result<T>) -> kube::Result<Self> {
        match result {
            Ok(_) => Ok(Self::Deleted),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Self::Gone),
            Err(kube::Error::Api(status)) if status.code == 409 || status.code == 412 => {
                Ok(Self::Refused)
            }
            Err(error) => Err(error),
        }
    }
}
