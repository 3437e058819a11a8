//! What the listener learned about a connection, attached to each of its requests as
//! extensions: which listener it came in on, and whether its peer was verified as the
//! owner's user. The listener sets them; the credential check and the owner check read them.

/// Which listener a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Loopback TCP.
    Tcp,
    /// The host's Unix-domain socket in its state directory.
    Local,
}

/// Whether the listener verified that the connection belongs to the owner's user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerVerified(pub bool);
