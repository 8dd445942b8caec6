//! The request parser on plain byte slices: framing, limits, pipelining.

use super::*;

fn parse_all(buf: &[u8]) -> Result<Option<Request>, ParseError> {
    RequestParser::new().parse(buf)
}

fn path<'a>(buf: &'a [u8], req: &Request) -> &'a [u8] {
    &buf[req.head.path.clone()]
}

#[test]
fn simple_get() {
    let buf = b"GET /hi?x=1 HTTP/1.1\r\nHost: a\r\n\r\n";
    let req = parse_all(buf).unwrap().unwrap();
    assert_eq!(path(buf, &req), b"/hi");
    assert_eq!(req.len, buf.len());
    assert_eq!(&buf[req.head.query.clone()], b"x=1");
    assert_eq!(req.body, Body::Empty);
    assert!(req.head.keep_alive);
    assert_eq!(req.head.method, Method::Get);
    assert!(!req.head.http10);
}

#[test]
fn content_length_body() {
    let buf = b"POST /echo HTTP/1.1\r\nContent-Length: 5\r\nContent-Type: text/x\r\n\r\nhello";
    let mut parser = RequestParser::new();
    let req = parser.parse(buf).unwrap().unwrap();
    assert_eq!(parser.body(buf, &req), b"hello");
    assert_eq!(&buf[req.head.content_type.clone().unwrap()], b"text/x");
    assert_eq!(req.len, buf.len());
}

#[test]
fn chunked_body() {
    let buf = b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
                5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: y\r\n\r\nGET /hi HTTP/1.1\r\n\r\n";
    let mut parser = RequestParser::new();
    let req = parser.parse(buf).unwrap().unwrap();
    assert_eq!(parser.body(buf, &req), b"hello, world");
    assert!(buf[req.len..].starts_with(b"GET /hi"));
}

#[test]
fn chunked_body_arriving_byte_by_byte() {
    let buf = b"POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
                3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    let mut parser = RequestParser::new();
    for end in 0..buf.len() {
        assert_eq!(parser.parse(&buf[..end]), Ok(None), "prefix of {end} bytes");
    }
    let req = parser.parse(buf).unwrap().unwrap();
    assert_eq!(parser.body(buf, &req), b"abcde");
    assert_eq!(req.len, buf.len());
}

#[test]
fn pipelined_requests_share_one_buffer() {
    let buf =
        b"GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nxyHEAD /c HTTP/1.1\r\n\r\n";
    let mut parser = RequestParser::new();
    let mut start = 0;
    let mut seen = Vec::new();
    while start < buf.len() {
        let rest = &buf[start..];
        let req = parser.parse(rest).unwrap().unwrap();
        seen.push((
            path(rest, &req).to_vec(),
            parser.body(rest, &req).to_vec(),
            req.head.method,
        ));
        start += req.len;
    }
    assert_eq!(
        seen,
        vec![
            (b"/a".to_vec(), vec![], Method::Get),
            (b"/b".to_vec(), b"xy".to_vec(), Method::Post),
            (b"/c".to_vec(), vec![], Method::Head),
        ]
    );
}

#[test]
fn partial_input_needs_more() {
    let buf = b"POST /echo HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd";
    let mut parser = RequestParser::new();
    for end in 0..buf.len() {
        assert_eq!(parser.parse(&buf[..end]), Ok(None), "prefix of {end} bytes");
    }
    assert!(parser.parse(buf).unwrap().is_some());
}

#[test]
fn expect_continue_is_reported_once_while_body_pending() {
    let head = b"PUT /echo HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
    let mut parser = RequestParser::new();
    assert_eq!(parser.parse(head), Ok(None));
    assert!(parser.take_continue());
    assert!(!parser.take_continue());
    let mut full = head.to_vec();
    full.extend_from_slice(b"ok");
    assert!(parser.parse(&full).unwrap().is_some());
    assert!(!parser.take_continue());
}

#[test]
fn connection_semantics() {
    let close = parse_all(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(!close.head.keep_alive);
    let old = parse_all(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
    assert!(!old.head.keep_alive);
    assert!(old.head.http10);
    let old_ka = parse_all(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(old_ka.head.keep_alive);
}

#[test]
fn absolute_form_target() {
    let buf = b"GET http://example.com:80/hi?q HTTP/1.1\r\n\r\n";
    let req = parse_all(buf).unwrap().unwrap();
    assert_eq!(path(buf, &req), b"/hi");
    assert_eq!(&buf[req.head.query.clone()], b"q");
}

#[test]
fn path_and_query() {
    fn split(target: &[u8]) -> (&[u8], &[u8]) {
        let (path, query) = split_target(target, 0);
        (&target[path], &target[query])
    }
    assert_eq!(split(b"/a"), (&b"/a"[..], &b""[..]));
    assert_eq!(split(b"/a?"), (&b"/a"[..], &b""[..]));
    assert_eq!(split(b"/a?page=2&x"), (&b"/a"[..], &b"page=2&x"[..]));
    assert_eq!(split(b"/a?p=1#frag"), (&b"/a"[..], &b"p=1"[..]));
    assert_eq!(split(b"/a#frag?no"), (&b"/a"[..], &b""[..]));
    assert_eq!(split(b"/a?b?c"), (&b"/a"[..], &b"b?c"[..]));
    assert_eq!(split(b"http://h"), (&b""[..], &b""[..]));
    assert_eq!(split(b"http://h?q=1"), (&b""[..], &b"q=1"[..]));
    assert_eq!(split(b"http://h/p?q=1"), (&b"/p"[..], &b"q=1"[..]));
}

#[test]
fn fields_are_parsed_again_on_demand() {
    let buf = b"POST /x HTTP/1.1\r\nCookie: a=b\r\nX-One: 1\r\ncookie: c=d\r\nContent-Length: 2\r\n\r\nhi";
    let fields = Fields::of(buf);
    assert_eq!(fields.iter().count(), 4);
    assert_eq!(
        fields.values("COOKIE").collect::<Vec<_>>(),
        [&b"a=b"[..], &b"c=d"[..]]
    );
    assert_eq!(fields.values("x-missing").count(), 0);
    assert_eq!(Fields::of(b"not http").iter().count(), 0);
}

#[test]
fn fields_of_an_http2_header_map() {
    let mut map = http::HeaderMap::new();
    map.append("cookie", http::HeaderValue::from_static("a=b"));
    map.append("x-one", http::HeaderValue::from_static("1"));
    map.append("cookie", http::HeaderValue::from_static("c=d"));
    let fields = Fields::Map(&map);
    assert_eq!(fields.iter().count(), 3);
    assert_eq!(
        fields.values("Cookie").collect::<Vec<_>>(),
        [&b"a=b"[..], &b"c=d"[..]]
    );
}

#[test]
fn malformed_input_is_rejected() {
    let cases: &[&[u8]] = &[
        b"THIS IS NOT HTTP\r\n\r\n",
        b"GET /hi HTTP/2.0\r\n\r\n",
        b"GET /hi HTTP/1.1\r\nBad Header\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
        b"\x00\x01\x02\xff\r\n\r\n",
    ];
    for case in cases {
        assert_eq!(
            parse_all(case),
            Err(ParseError::Malformed),
            "{:?}",
            String::from_utf8_lossy(case)
        );
    }
}

#[test]
fn limits() {
    assert_eq!(
        parse_all(b"POST / HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n"),
        Err(ParseError::BodyTooLarge)
    );
    assert_eq!(
        parse_all(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nfffffffff\r\n"),
        Err(ParseError::BodyTooLarge)
    );
    assert_eq!(
        parse_all(b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
        Err(ParseError::UnsupportedEncoding)
    );
    let mut long = b"GET /".to_vec();
    long.resize(MAX_HEAD + 10, b'a');
    assert_eq!(parse_all(&long), Err(ParseError::HeadTooLarge));
    let mut many = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..=MAX_HEADERS {
        many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(parse_all(&many), Err(ParseError::HeadTooLarge));
}

#[test]
fn decimal() {
    assert_eq!(parse_decimal(b"0"), Some(0));
    assert_eq!(parse_decimal(b"18446744073709551615"), Some(u64::MAX));
    assert_eq!(parse_decimal(b"18446744073709551616"), None);
    assert_eq!(parse_decimal(b""), None);
    assert_eq!(parse_decimal(b"+1"), None);
    assert_eq!(parse_decimal(b"1x"), None);
}
