//! How many connections volley has open to the target, read from the
//! kernel once per interval (Linux): the process's socket inodes
//! (`/proc/self/fd`) matched against the established TCP connections to the
//! target's addresses (`/proc/self/net/tcp` and `tcp6`).
//!
//! Read from outside the engine so that counting costs the engine nothing:
//! its workers keep no shared count of their connections, by design.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The state column's value for an established connection.
const ESTABLISHED: &str = "01";

/// The inodes of this process's sockets.
fn socket_inodes() -> Option<HashSet<u64>> {
    let mut inodes = HashSet::new();
    for entry in std::fs::read_dir("/proc/self/fd").ok()?.flatten() {
        if let Ok(link) = std::fs::read_link(entry.path()) {
            let link = link.to_string_lossy();
            let inode = link.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']'));
            if let Some(Ok(inode)) = inode.map(str::parse) {
                inodes.insert(inode);
            }
        }
    }
    Some(inodes)
}

/// An address as `/proc/net/tcp` writes it: the IP's memory (network
/// order) printed as native 32-bit words in hex, then `:` and the port in
/// hex.
fn parse_address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let words: Vec<u32> = (0..ip.len() / 8)
        .map(|i| u32::from_str_radix(&ip[i * 8..i * 8 + 8], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    let ip = match words.as_slice() {
        [a] => IpAddr::V4(Ipv4Addr::from(a.to_ne_bytes())),
        [a, b, c, d] => {
            let mut bytes = [0u8; 16];
            for (i, w) in [a, b, c, d].iter().enumerate() {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Established connections in a `/proc/net/tcp` table whose remote end is
/// one of `targets` and whose inode is in `mine`.
fn count_in(table: &str, targets: &[SocketAddr], mine: &HashSet<u64>) -> u64 {
    let normal = |a: SocketAddr| match a.ip() {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(a, |v4| SocketAddr::new(IpAddr::V4(v4), a.port())),
        IpAddr::V4(_) => a,
    };
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 9
                && fields[3] == ESTABLISHED
                && fields[9].parse().is_ok_and(|inode: u64| mine.contains(&inode))
                && parse_address(fields[2])
                    .is_some_and(|remote| targets.iter().any(|t| normal(*t) == normal(remote)))
        })
        .count() as u64
}

/// This process's established connections to `targets`; `None` where the
/// kernel does not say (not Linux).
pub fn open_connections(targets: &[SocketAddr]) -> Option<u64> {
    let mine = socket_inodes()?;
    let mut count = 0;
    let mut readable = false;
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(table) {
            readable = true;
            count += count_in(&text, targets, &mine);
        }
    }
    readable.then_some(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_as_the_kernel_writes_them() {
        assert_eq!(
            parse_address("0100007F:1F90"),
            Some("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(
            parse_address("00000000000000000000000001000000:0050"),
            Some("[::1]:80".parse().unwrap())
        );
        assert_eq!(parse_address("zz:1"), None);
    }

    #[test]
    fn counts_only_established_own_connections_to_the_target() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 11 1\n\
   1: 0100007F:9C41 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 12 1\n\
   2: 0100007F:9C42 0100007F:1F90 06 00000000:00000000 00:00000000 00000000  1000        0 13 1\n\
   3: 0100007F:9C43 0100007F:1F91 01 00000000:00000000 00:00000000 00000000  1000        0 14 1\n\
   4: 0100007F:9C44 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 99 1\n";
        let mine: HashSet<u64> = [11, 12, 13, 14].into_iter().collect();
        let target: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        // 11 and 12: established, ours, to the target. 13 is closing, 14
        // goes elsewhere, 99 is another process's.
        assert_eq!(count_in(table, &[target], &mine), 2);
    }

    #[test]
    fn this_process_s_own_connection_is_seen() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = std::net::TcpStream::connect(addr).unwrap();
        let _server_side = listener.accept().unwrap();
        if let Some(n) = open_connections(&[addr]) {
            assert_eq!(n, 1);
        }
    }
}
