//! Who is on the other end of a connection: the uid owning the peer's socket.
//!
//! Loopback is not the owner: any local user can connect to 127.0.0.1. For a TCP
//! connection from this machine the kernel knows which user's socket the peer is; the host
//! asks it through netlink `sock_diag` (one exact lookup by the connection's four-tuple,
//! no privileges needed), and falls back to reading `/proc/net/tcp` / `tcp6` when netlink
//! is not available. For a Unix-domain socket, `SO_PEERCRED` says it directly.
//!
//! **Only a live, full socket vouches for a uid.** A client that writes and closes at once
//! can leave, by the time the host accepts, only a kernel mini-socket (`TIME_WAIT`, or the
//! `FIN_WAIT2` of an orphan): the kernel reports uid 0 and inode 0 for it, whoever opened
//! it. So a lookup names a uid only for a socket in `ESTABLISHED` or `CLOSE_WAIT` with an
//! inode (one a process still holds); anything else — a mini-socket, another state, no
//! match — is *unknown*, and the listener treats the connection as unverified, never as
//! the owner's.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;

use rustix::net::netlink::{self, SocketAddrNetlink};
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

/// `SOCK_DIAG_BY_FAMILY`, the request type of an `inet_diag_req_v2`.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
/// `NLM_F_REQUEST`.
const NLM_F_REQUEST: u16 = 1;
/// `NLMSG_ERROR`.
const NLMSG_ERROR: u16 = 2;
/// `IPPROTO_TCP`.
const IPPROTO_TCP: u8 = 6;
/// `AF_INET`, `AF_INET6` as the kernel's `sdiag_family` spells them.
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
/// Header of a netlink message.
const NLMSG_HDR: usize = 16;
/// Where `idiag_state` sits in an `inet_diag_msg` (after the family).
const STATE_OFFSET: usize = 1;
/// Where `idiag_uid` sits in an `inet_diag_msg` (after family, state, timer, retrans, the
/// 48-byte socket id, expires, rqueue and wqueue).
const UID_OFFSET: usize = 4 + 48 + 12;
/// Where `idiag_inode` sits: right after the uid.
const INODE_OFFSET: usize = UID_OFFSET + 4;
/// `TCP_ESTABLISHED` and `TCP_CLOSE_WAIT`: the states in which the client's end of a
/// connection the host has not closed is a full socket a process holds.
const LIVE_STATES: [u8; 2] = [1, 8];

/// What the kernel says of the client's socket of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ClientSocket {
    state: u8,
    uid: u32,
    inode: u64,
}

impl ClientSocket {
    /// Its uid, when the socket can vouch for it: a full socket in a live state that a
    /// process still holds. A mini-socket reports uid 0 and inode 0 whoever made it.
    fn vouched_uid(self) -> Option<u32> {
        (LIVE_STATES.contains(&self.state) && self.inode != 0).then_some(self.uid)
    }
}

/// The uid owning the client's socket of the TCP connection `peer` → `local` (both on
/// this machine), when a live, full socket vouches for it (see the module doc); `None`
/// when there is no such socket, or only one that cannot vouch for its owner.
///
/// # Errors
/// When neither netlink nor `/proc` could be asked.
pub fn tcp_peer_uid(local: SocketAddr, peer: SocketAddr) -> io::Result<Option<u32>> {
    match sock_diag_uid(local, peer) {
        Ok(found) => Ok(found),
        Err(_) => proc_net_uid(local, peer),
    }
}

/// The uid of the process on the other end of a Unix-domain socket.
///
/// # Errors
/// When the kernel cannot say.
pub fn unix_peer_uid(socket: impl AsFd) -> io::Result<u32> {
    Ok(rustix::net::sockopt::socket_peercred(socket)?.uid.as_raw())
}

/// This process's effective uid: the owner's.
#[must_use]
pub fn own_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The lookup through netlink `sock_diag` (what [`tcp_peer_uid`] tries first; public so
/// that its cost per connection can be measured).
///
/// # Errors
/// When the netlink socket cannot be used.
pub fn sock_diag_uid(local: SocketAddr, peer: SocketAddr) -> io::Result<Option<u32>> {
    let socket = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        Some(netlink::SOCK_DIAG),
    )?;
    let request = diag_request(local, peer);
    rustix::net::sendto(&socket, &request, SendFlags::empty(), &SocketAddrNetlink::new(0, 0))?;
    let mut buf = [0u8; 1024];
    let (len, _) = rustix::net::recv(&socket, &mut buf, RecvFlags::empty())?;
    Ok(parse_diag_answer(&buf[..len])?.and_then(ClientSocket::vouched_uid))
}

/// An `nlmsghdr` + `inet_diag_req_v2` looking up the one socket whose local end is `peer`
/// and remote end `local` (the client's socket of this connection).
fn diag_request(local: SocketAddr, peer: SocketAddr) -> Vec<u8> {
    let mut body = Vec::with_capacity(56);
    body.push(if peer.is_ipv4() && local.is_ipv4() { AF_INET } else { AF_INET6 });
    body.push(IPPROTO_TCP);
    body.push(0); // idiag_ext
    body.push(0); // pad
    body.extend_from_slice(&u32::MAX.to_ne_bytes()); // every state
    body.extend_from_slice(&peer.port().to_be_bytes()); // idiag_sport
    body.extend_from_slice(&local.port().to_be_bytes()); // idiag_dport
    let both_v4 = peer.is_ipv4() && local.is_ipv4();
    body.extend_from_slice(&address_words(peer.ip(), both_v4)); // idiag_src
    body.extend_from_slice(&address_words(local.ip(), both_v4)); // idiag_dst
    body.extend_from_slice(&0u32.to_ne_bytes()); // idiag_if
    body.extend_from_slice(&u32::MAX.to_ne_bytes()); // INET_DIAG_NOCOOKIE
    body.extend_from_slice(&u32::MAX.to_ne_bytes());
    let len = u32::try_from(NLMSG_HDR + body.len()).unwrap_or(u32::MAX);
    let mut message = Vec::with_capacity(NLMSG_HDR + body.len());
    message.extend_from_slice(&len.to_ne_bytes());
    message.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    message.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    message.extend_from_slice(&1u32.to_ne_bytes()); // seq
    message.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel fills it in
    message.extend_from_slice(&body);
    message
}

/// An address as the four big-endian words of `inet_diag_sockid` (IPv4 in the first).
fn address_words(ip: IpAddr, v4: bool) -> [u8; 16] {
    let mut out = [0u8; 16];
    match ip {
        IpAddr::V4(v4addr) if v4 => out[..4].copy_from_slice(&v4addr.octets()),
        IpAddr::V4(v4addr) => out.copy_from_slice(&v4addr.to_ipv6_mapped().octets()),
        IpAddr::V6(v6addr) => match v6addr.to_ipv4_mapped() {
            Some(mapped) if v4 => out[..4].copy_from_slice(&mapped.octets()),
            _ => out.copy_from_slice(&v6addr.octets()),
        },
    }
    out
}

/// The socket in the kernel's answer; `None` when it found no such socket.
fn parse_diag_answer(answer: &[u8]) -> io::Result<Option<ClientSocket>> {
    let word = |at: usize| -> Option<u32> { Some(u32::from_ne_bytes(answer.get(at..at + 4)?.try_into().ok()?)) };
    let kind = answer.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    match kind {
        Some(NLMSG_ERROR) => {
            let errno = word(NLMSG_HDR).map_or(0, |e| e.cast_signed());
            if errno == -2 {
                Ok(None) // ENOENT: no such socket
            } else {
                Err(io::Error::from_raw_os_error(-errno))
            }
        }
        Some(SOCK_DIAG_BY_FAMILY) => {
            let state = answer.get(NLMSG_HDR + STATE_OFFSET).copied();
            match (state, word(NLMSG_HDR + UID_OFFSET), word(NLMSG_HDR + INODE_OFFSET)) {
                (Some(state), Some(uid), Some(inode)) => Ok(Some(ClientSocket { state, uid, inode: u64::from(inode) })),
                _ => Err(io::Error::new(io::ErrorKind::InvalidData, "a short sock_diag answer")),
            }
        }
        _ => Err(io::Error::new(io::ErrorKind::InvalidData, "an unexpected sock_diag answer")),
    }
}

/// The same lookup through `/proc/net/tcp` and `/proc/net/tcp6` (the fallback).
///
/// # Errors
/// When neither table can be read.
pub fn proc_net_uid(local: SocketAddr, peer: SocketAddr) -> io::Result<Option<u32>> {
    let mut last_error = None;
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        match std::fs::read_to_string(file) {
            Ok(table) => {
                if let Some(socket) = find_in_proc_table(&table, local, peer) {
                    return Ok(socket.vouched_uid());
                }
            }
            Err(e) => last_error = Some(e),
        }
    }
    match last_error {
        Some(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(None),
    }
}

/// The state, uid and inode columns of the row whose local address is `peer` and remote
/// `local`.
fn find_in_proc_table(table: &str, local: SocketAddr, peer: SocketAddr) -> Option<ClientSocket> {
    table.lines().skip(1).find_map(|row| {
        let fields: Vec<&str> = row.split_whitespace().collect();
        let (from, to) = (fields.get(1)?, fields.get(2)?);
        if proc_addr(from)? != peer || proc_addr(to)? != local {
            return None;
        }
        Some(ClientSocket {
            state: u8::from_str_radix(fields.get(3)?, 16).ok()?,
            uid: fields.get(7)?.parse().ok()?,
            inode: fields.get(9)?.parse().ok()?,
        })
    })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits + port (IPv6), each word in host byte order.
fn proc_addr(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..addr.len() / 8)
        .map(|i| u32::from_str_radix(addr.get(i * 8..i * 8 + 8)?, 16).ok())
        .collect::<Option<_>>()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let ip = match bytes.len() {
        4 => IpAddr::from(<[u8; 4]>::try_from(bytes.as_slice()).ok()?),
        16 => {
            let v6 = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(bytes.as_slice()).ok()?);
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_names_our_own_uid_for_our_own_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let client = std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server_side, peer) = listener.accept().expect("accept");
        let local = server_side.local_addr().expect("local");
        assert_eq!(peer, client.local_addr().expect("client addr"));
        assert_eq!(sock_diag_uid(local, peer).expect("netlink answers"), Some(own_uid()));
        assert_eq!(proc_net_uid(local, peer).expect("proc answers"), Some(own_uid()));
        // A four-tuple that is no connection.
        let nobody = SocketAddr::new(peer.ip(), 1);
        assert_eq!(tcp_peer_uid(local, nobody).expect("asked"), None);
    }

    /// The client's socket of a connection as both lookups see it, once `settled` says
    /// it reached the state the test waits for (within 5 s).
    fn client_socket_when(local: SocketAddr, peer: SocketAddr, settled: impl Fn(Option<ClientSocket>) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let socket = diag_socket(local, peer);
            if settled(socket) {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "the client's socket never settled: {socket:?}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    fn diag_socket(local: SocketAddr, peer: SocketAddr) -> Option<ClientSocket> {
        let socket = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            Some(netlink::SOCK_DIAG),
        )
        .expect("netlink");
        rustix::net::sendto(&socket, &diag_request(local, peer), SendFlags::empty(), &SocketAddrNetlink::new(0, 0))
            .expect("send");
        let mut buf = [0u8; 1024];
        let (len, _) = rustix::net::recv(&socket, &mut buf, RecvFlags::empty()).expect("recv");
        parse_diag_answer(&buf[..len]).expect("an answer")
    }

    /// The attack: a client writes a request and closes before the host accepts. What is
    /// left of its socket is a mini-socket whose uid the kernel reports as 0 — root's, the
    /// owner's when the host runs as root. It vouches for nobody.
    #[test]
    fn a_client_that_closed_before_the_accept_is_nobody() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut client = std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let peer = client.local_addr().expect("client addr");
        client.write_all(b"GET /myspace-butler/api/health HTTP/1.1\r\nHost: x\r\n\r\nGET /").expect("write");
        drop(client);
        let (server_side, accepted_peer) = listener.accept().expect("accept");
        assert_eq!(accepted_peer, peer);
        let local = server_side.local_addr().expect("local");
        // The kernel turns the orphan into a FIN_WAIT2 mini-socket once the host's end
        // acknowledged its FIN: wait for that, then look.
        client_socket_when(local, peer, |s| s.is_some_and(|s| s.inode == 0));
        assert_eq!(sock_diag_uid(local, peer).expect("netlink answers"), None, "netlink");
        assert_eq!(proc_net_uid(local, peer).expect("proc answers"), None, "/proc");
        assert_eq!(tcp_peer_uid(local, peer).expect("asked"), None);

        // A client that only half-closed still holds its socket, but in FIN_WAIT2: not a
        // live state either.
        let client = std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let peer = client.local_addr().expect("client addr");
        client.shutdown(std::net::Shutdown::Write).expect("half-close");
        let (server_side, _) = listener.accept().expect("accept");
        let local = server_side.local_addr().expect("local");
        client_socket_when(local, peer, |s| s.is_some_and(|s| s.state != LIVE_STATES[0]));
        assert_eq!(tcp_peer_uid(local, peer).expect("asked"), None, "a half-closed client");
        drop(client);
    }

    #[test]
    fn proc_rows_parse_in_both_families() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
                     0: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 1\n";
        let local: SocketAddr = "127.0.0.1:8080".parse().expect("addr");
        let peer: SocketAddr = "127.0.0.1:40000".parse().expect("addr");
        assert_eq!(
            find_in_proc_table(table, local, peer).and_then(ClientSocket::vouched_uid),
            Some(1000),
            "an established socket with an inode vouches for its uid"
        );
        assert_eq!(find_in_proc_table(table, peer, local), None, "the server's own row is not the peer's");
        // The rows the kernel shows for a mini-socket: TIME_WAIT (06) and an orphan's
        // FIN_WAIT2 (05), uid 0 and inode 0, whoever opened them; and a socket in FIN_WAIT1.
        for (state, uid, inode) in [("06", 0, 0), ("05", 0, 0), ("04", 1000, 7), ("01", 0, 0)] {
            let row = format!(
                "  sl  local_address rem_address   st\n\
                 0: 0100007F:9C40 0100007F:1F90 {state} 00000000:00000000 00:00000000 00000000 {uid:5}        0 {inode}\n"
            );
            let found = find_in_proc_table(&row, local, peer).expect("the row is found");
            assert_eq!(found.vouched_uid(), None, "state {state}, uid {uid}, inode {inode} vouches for nobody");
        }
        assert_eq!(
            proc_addr("00000000000000000000000001000000:1F90"),
            Some("[::1]:8080".parse().expect("addr")),
            "IPv6 loopback"
        );
    }
}
