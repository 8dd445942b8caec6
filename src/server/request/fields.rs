//! A second look at a request's header fields, for the few endpoints that
//! want more than the parser's [`super::Head`] keeps (cookies, credentials),
//! so that ordinary requests pay nothing for them.

use super::MAX_HEADERS;
use httparse::Status;

/// The header fields of a request, for the endpoints that want more than
/// [`Head`] keeps: an HTTP/1.1 head already accepted by
/// [`RequestParser::parse`], parsed again (held on the stack, like the first
/// parse), or the header map HTTP/2 decoded.
// The parsed variant is large, but lives briefly on the stack of the few
// endpoints that read fields; boxing it would allocate for nothing.
#[allow(clippy::large_enum_variant)]
pub(in crate::server) enum Fields<'a> {
    Parsed {
        all: [httparse::Header<'a>; MAX_HEADERS],
        len: usize,
    },
    Map(&'a http::HeaderMap),
}

impl<'a> Fields<'a> {
    /// `request` starts where the request does (its body may follow).
    pub(in crate::server) fn of(request: &'a [u8]) -> Self {
        let mut all = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut all);
        // The same bytes parsed before, so this succeeds; were it not to,
        // no fields at all is the answer that cannot be misread.
        let len = match req.parse(request) {
            Ok(Status::Complete(_)) => req.headers.len(),
            _ => 0,
        };
        Fields::Parsed { all, len }
    }

    /// Every field as sent (HTTP/2 sends names in lower case): name, then
    /// value.
    pub(in crate::server) fn iter(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> {
        // One of the two is empty; chaining them avoids boxing an iterator.
        let (parsed, map) = match self {
            Fields::Parsed { all, len } => (&all[..*len], None),
            Fields::Map(map) => (&[][..], Some(*map)),
        };
        parsed.iter().map(|h| (h.name, h.value)).chain(
            map.into_iter()
                .flat_map(|map| map.iter().map(|(name, value)| (name.as_str(), value.as_bytes()))),
        )
    }

    /// The values of the fields called `name` (in any case), in order.
    pub(in crate::server) fn values(&self, name: &str) -> impl Iterator<Item = &'a [u8]> {
        self.iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
}
