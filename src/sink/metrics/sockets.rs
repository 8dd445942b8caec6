//! How many connections volley has open to the target, asked of the
//! kernel once per interval (Linux): each of the process's sockets
//! (`/proc/self/fd`) is checked for an established TCP connection
//! (`TCP_INFO`) or a connected UDP socket (each QUIC connection has one of
//! its own) whose peer (`getpeername`) is one of the target's addresses.
//!
//! Asked from outside the engine so that counting costs the engine nothing:
//! its workers keep no shared count of their connections, by design. Only
//! the process's own sockets are looked at: `/proc/net/tcp` would make the
//! kernel walk every connection on the machine, which costs milliseconds
//! per read on a busy host.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The process's socket descriptors.
fn socket_fds() -> Option<Vec<i32>> {
    let mut fds = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").ok()?.flatten() {
        let is_socket =
            std::fs::read_link(entry.path()).is_ok_and(|l| l.to_string_lossy().starts_with("socket:"));
        if let (true, Some(Ok(fd))) = (is_socket, entry.file_name().to_str().map(str::parse)) {
            fds.push(fd);
        }
    }
    Some(fds)
}

/// A socket address as the kernel gave it, when it is IPv4 or IPv6.
fn from_storage(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let v4 = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
            Some(SocketAddr::new(IpAddr::V4(ip), u16::from_be(v4.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let v6 = unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(v6.sin6_addr.s6_addr);
            Some(SocketAddr::new(IpAddr::V6(ip), u16::from_be(v6.sin6_port)))
        }
        _ => None,
    }
}

/// Reads the socket option `name` at `level` of `fd` into `value`; false
/// where the kernel refuses (a descriptor of another kind, or one closed
/// meanwhile).
///
/// # Safety
///
/// `T` is the plain data the option fills (an int, `tcp_info`): any bytes
/// the kernel writes are a valid `T`.
#[cfg(target_os = "linux")]
unsafe fn socket_option<T: Copy>(fd: i32, level: i32, name: i32, value: &mut T) -> bool {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: a read-only query on a descriptor this process holds; the
    // kernel writes at most `len` bytes, the size of `value`, which the
    // caller vouches any bytes are valid for.
    unsafe { libc::getsockopt(fd, level, name, (value as *mut T).cast(), &mut len) == 0 }
}

/// The peer of `fd` when it is a connection: an established TCP
/// connection, or a UDP socket connected to a peer (an HTTP/3 run's QUIC
/// connection; volley connects no other UDP socket).
#[cfg(target_os = "linux")]
fn established_peer(fd: i32) -> Option<SocketAddr> {
    let mut kind: libc::c_int = 0;
    // SAFETY: SO_TYPE fills an int.
    let connected = unsafe { socket_option(fd, libc::SOL_SOCKET, libc::SO_TYPE, &mut kind) }
        && match kind {
            libc::SOCK_STREAM => {
                // SAFETY: tcp_info is plain data, for which zeroes are valid.
                let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
                // SAFETY: TCP_INFO fills a tcp_info, plain data.
                let got = unsafe { socket_option(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut info) };
                // TCP_ESTABLISHED is 1 in the kernel's TCP state numbering.
                got && info.tcpi_state == 1
            }
            // Only a connected one has a peer, asked below.
            libc::SOCK_DGRAM => true,
            _ => false,
        };
    if !connected {
        return None;
    }
    // SAFETY: plain data, filled by the kernel up to `len`.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: a read-only query on a descriptor this process holds.
    let got =
        unsafe { libc::getpeername(fd, (&mut storage as *mut libc::sockaddr_storage).cast(), &mut len) };
    if got != 0 {
        return None;
    }
    from_storage(&storage)
}

#[cfg(not(target_os = "linux"))]
fn established_peer(_fd: i32) -> Option<SocketAddr> {
    None
}

/// An IPv4 address written as IPv6 (`::ffff:a.b.c.d`) compares as IPv4.
fn normal(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(addr, |v4| SocketAddr::new(IpAddr::V4(v4), addr.port())),
        IpAddr::V4(_) => addr,
    }
}

/// This process's established connections to `targets`; `None` where the
/// kernel does not say (not Linux).
pub fn open_connections(targets: &[SocketAddr]) -> Option<u64> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let targets: Vec<SocketAddr> = targets.iter().copied().map(normal).collect();
    let count = socket_fds()?
        .into_iter()
        .filter_map(established_peer)
        .filter(|peer| targets.contains(&normal(*peer)))
        .count();
    Some(count as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_established_connections_to_the_target_count() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _to_target = std::net::TcpStream::connect(addr).unwrap();
        let _server_side = listener.accept().unwrap();
        let _elsewhere = std::net::TcpStream::connect(other.local_addr().unwrap()).unwrap();
        let Some(n) = open_connections(&[addr]) else {
            return;
        };
        // The client's connection; not the server side (its peer is the
        // client's port), not the listener, not the other connection.
        assert_eq!(n, 1);
        let mapped: SocketAddr = format!("[::ffff:127.0.0.1]:{}", addr.port()).parse().unwrap();
        assert_eq!(open_connections(&[mapped]), Some(1));
    }

    #[test]
    fn connected_udp_sockets_count_as_quic_connections() {
        let target = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = target.local_addr().unwrap();
        let quic = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        quic.connect(addr).unwrap();
        // Unconnected: it has no peer, whatever it sends where.
        let _unconnected = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(matches!(open_connections(&[addr]), Some(1) | None));
        drop(quic);
        assert!(matches!(open_connections(&[addr]), Some(0) | None));
    }
}
