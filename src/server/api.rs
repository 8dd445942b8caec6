//! A small JSON API under `/api/`, for scenario tests that log in, list,
//! fetch one item and post one, the way a user of a real service would.
//!
//! Nothing is stored: users 1 to 100 are computed from their id, a login
//! succeeds for any user name with the one password, and a created user is
//! always number 101 and then forgotten. So every server answers alike, and
//! runs of a scenario against it can be compared.
//!
//! Each endpoint is a plain function from what the request holds to a
//! [`Json`] reply, so it can be unit tested without a socket; [`reply`]
//! hands it to the protocol to write.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::reply::{Body, Incoming, Reply};
use super::request::{Fields, Method, parse_decimal};

const JSON: Option<&[u8]> = Some(b"application/json");
/// Users 1 to this exist.
const USERS: u64 = 100;
const PAGE_SIZE: u64 = 10;
/// The password that logs anyone in.
const PASSWORD: &str = "secret";
/// What every `POST /api/users` is told it created.
const CREATED_ID: u64 = 101;
/// Longest user name accepted: it travels back in cookies and tokens, which
/// clients cap in size.
const MAX_USER_NAME: usize = 256;
/// The session cookie set by a login; its value is this prefix and the name.
const SESSION_COOKIE: &[u8] = b"session";
const SESSION_PREFIX: &[u8] = b"sess-";
const TOKEN_PREFIX: &[u8] = b"tok-";

/// An endpoint under `/api/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Api {
    Login,
    Me,
    Users,
    /// `/api/users/{id}`; `None` when the id is not a number.
    User(Option<u64>),
    EchoHeaders,
    NotFound,
}

impl Api {
    /// `rest` is the path after `/api/`.
    pub(super) fn of(rest: &[u8]) -> Api {
        match rest {
            b"login" => Api::Login,
            b"me" => Api::Me,
            b"users" => Api::Users,
            b"echo-headers" => Api::EchoHeaders,
            _ => match rest.strip_prefix(b"users/") {
                Some(id) if !id.contains(&b'/') => Api::User(user_id(id)),
                _ => Api::NotFound,
            },
        }
    }
}

/// Digits are an id even past `u64`: such a user is as absent as user 101,
/// which deserves a 404, not the 400 of "not a number".
fn user_id(digits: &[u8]) -> Option<u64> {
    parse_decimal(digits)
        .or_else(|| (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit)).then_some(u64::MAX))
}

/// The answer to a request for `api`.
pub(super) fn reply(api: Api, req: &Incoming<'_>) -> Reply<'static> {
    let json = reply_to(api, req.method, || req.fields(), req.query, req.body);
    Reply {
        status: json.status,
        content_type: JSON,
        fields: json.fields,
        body: Body::Owned(json.body),
    }
}

/// A JSON response, not yet written.
#[derive(Debug)]
struct Json {
    status: u16,
    body: Vec<u8>,
    /// Header fields besides the usual ones.
    fields: Vec<(&'static str, String)>,
}

impl Json {
    fn with(mut self, name: &'static str, value: String) -> Self {
        self.fields.push((name, value));
        self
    }
}

/// `fields` gives the request's header fields, for the endpoints that read
/// them; `query` and `body` are its other parts.
fn reply_to<'a>(
    api: Api,
    method: Method,
    fields: impl FnOnce() -> Fields<'a>,
    query: &[u8],
    body: &[u8],
) -> Json {
    use Method::{Get, Head, Post};
    match (api, method) {
        (Api::Login, Post) => login(body),
        (Api::Me, Get | Head) => me(&fields()),
        (Api::Users, Get | Head) => users(query),
        (Api::Users, Post) => create_user(body),
        (Api::User(id), Get | Head) => user(id),
        // Any method: a scenario may want to see what its POSTs carry.
        (Api::EchoHeaders, _) => echo_headers(&fields()),
        (Api::NotFound, _) => error(404, "not found"),
        (Api::Login, _) => not_allowed("POST"),
        (Api::Users, _) => not_allowed("GET, HEAD, POST"),
        (Api::Me | Api::User(_), _) => not_allowed("GET, HEAD"),
    }
}

fn json(status: u16, body: &impl Serialize) -> Json {
    match serde_json::to_vec(body) {
        Ok(body) => Json {
            status,
            body,
            fields: Vec::new(),
        },
        // Only maps with keys that are not strings fail to serialize, and
        // none are built here; still, a 500 beats a panic.
        Err(_) => Json {
            status: 500,
            body: br#"{"error":"internal error"}"#.to_vec(),
            fields: Vec::new(),
        },
    }
}

fn error(status: u16, message: &str) -> Json {
    json(status, &json!({ "error": message }))
}

/// A 401 must name a way to authenticate (RFC 9110 section 15.5.2).
fn unauthorized(message: &str) -> Json {
    error(401, message).with("WWW-Authenticate", "Bearer".into())
}

/// A 405 must say which methods would do (RFC 9110 section 15.5.6).
fn not_allowed(allow: &str) -> Json {
    error(405, "method not allowed").with("Allow", allow.into())
}

/// The body as a JSON object; `None` for anything else.
fn json_object(body: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(object)) => Some(object),
        _ => None,
    }
}

/// The string member `name` of `object`.
fn string_field<'a>(object: Option<&'a Map<String, Value>>, name: &str) -> Option<&'a str> {
    object?.get(name)?.as_str()
}

/// `POST /api/login`.
fn login(body: &[u8]) -> Json {
    let object = json_object(body);
    let (Some(name), Some(password)) = (
        string_field(object.as_ref(), "username"),
        string_field(object.as_ref(), "password"),
    ) else {
        return error(
            400,
            r#"expected a JSON object with "username" and "password" strings"#,
        );
    };
    if password != PASSWORD {
        return unauthorized("bad credentials");
    }
    // The name goes into a cookie and a header; one that cannot go there
    // cannot have a session.
    if !is_user_name(name.as_bytes()) {
        return error(
            400,
            "the username must be 1 to 256 printable ASCII characters, \
             without spaces, quotes, commas, semicolons or backslashes",
        );
    }
    json(200, &json!({ "token": format!("tok-{name}"), "user": name }))
        .with("Set-Cookie", format!("session=sess-{name}; Path=/; HttpOnly"))
}

/// Names that fit a cookie value unquoted (RFC 6265's `cookie-octet`) and so
/// also a header field and a JSON string without escapes.
fn is_user_name(name: &[u8]) -> bool {
    (1..=MAX_USER_NAME).contains(&name.len())
        && name
            .iter()
            .all(|&b| b.is_ascii_graphic() && !matches!(b, b'"' | b',' | b';' | b'\\'))
}

/// `GET /api/me`: the session cookie first, then a bearer token.
fn me(fields: &Fields<'_>) -> Json {
    let from_cookie = fields
        .values("cookie")
        .flat_map(cookies)
        .filter(|&(name, _)| name == SESSION_COOKIE)
        .find_map(|(_, value)| user_named(value, SESSION_PREFIX));
    let user = from_cookie.or_else(|| {
        fields
            .values("authorization")
            .filter_map(bearer_token)
            .find_map(|token| user_named(token, TOKEN_PREFIX))
    });
    match user {
        // A user name is ASCII, so this never replaces anything.
        Some(name) => json(200, &json!({ "user": String::from_utf8_lossy(name) })),
        None => unauthorized("not logged in"),
    }
}

/// The user a session or token names, if it names one a login could have.
fn user_named<'a>(credential: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    credential.strip_prefix(prefix).filter(|name| is_user_name(name))
}

/// The `name=value` pairs of a `Cookie` field (`a=b; c=d`), trimmed, a
/// quoted value unquoted. Pieces without `=` are skipped.
fn cookies(field: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    field.split(|&b| b == b';').filter_map(|pair| {
        let eq = pair.iter().position(|&b| b == b'=')?;
        let (name, value) = (pair[..eq].trim_ascii(), pair[eq + 1..].trim_ascii());
        let value = value
            .strip_prefix(b"\"")
            .and_then(|v| v.strip_suffix(b"\""))
            .unwrap_or(value);
        Some((name, value))
    })
}

/// The token of an `Authorization: Bearer <token>` field; the scheme is
/// case-insensitive (RFC 9110 section 11.1).
fn bearer_token(field: &[u8]) -> Option<&[u8]> {
    let field = field.trim_ascii();
    let space = field.iter().position(|&b| b == b' ')?;
    let (scheme, token) = (&field[..space], field[space..].trim_ascii());
    (scheme.eq_ignore_ascii_case(b"bearer") && !token.is_empty()).then_some(token)
}

#[derive(Serialize)]
struct User {
    id: u64,
    name: String,
    email: String,
}

impl User {
    fn new(id: u64) -> Self {
        Self {
            id,
            name: format!("user-{id}"),
            email: format!("user-{id}@example.test"),
        }
    }
}

/// `GET /api/users[?page=N]`.
fn users(query: &[u8]) -> Json {
    #[derive(Serialize)]
    struct Page {
        users: Vec<User>,
        total: u64,
    }
    let page = match query_value(query, b"page") {
        None => 1,
        Some(value) => match parse_decimal(value) {
            Some(page) if page >= 1 => page,
            _ => return error(400, "page must be a whole number from 1"),
        },
    };
    // Saturating: a page far past the end is just empty.
    let first = (page - 1).saturating_mul(PAGE_SIZE).saturating_add(1);
    let last = first.saturating_add(PAGE_SIZE - 1).min(USERS);
    let users = (first..=last).map(User::new).collect();
    json(200, &Page { users, total: USERS })
}

/// The value of the first `key=value` pair for `key` in a query string. Not
/// percent-decoded: the one parameter read, a page number, needs none.
fn query_value<'a>(query: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    query.split(|&b| b == b'&').find_map(|pair| {
        let (k, v) = match pair.iter().position(|&b| b == b'=') {
            Some(eq) => (&pair[..eq], &pair[eq + 1..]),
            None => (pair, &b""[..]),
        };
        (k == key).then_some(v)
    })
}

/// `GET /api/users/{id}`.
fn user(id: Option<u64>) -> Json {
    match id {
        Some(id @ 1..=USERS) => json(200, &User::new(id)),
        Some(_) => error(404, "no such user"),
        None => error(400, "the user id must be a whole number"),
    }
}

/// `POST /api/users`: says it created the user, stores nothing.
fn create_user(body: &[u8]) -> Json {
    #[derive(Serialize)]
    struct Created<'a> {
        id: u64,
        name: &'a str,
        created: bool,
    }
    let object = json_object(body);
    let Some(name) = string_field(object.as_ref(), "name") else {
        return error(400, r#"expected a JSON object with a "name" string"#);
    };
    json(
        201,
        &Created {
            id: CREATED_ID,
            name,
            created: true,
        },
    )
}

/// `/api/echo-headers`: the request's header fields, names in lower case.
/// Repeated fields are joined the way HTTP allows them to be combined: with
/// `; ` for `Cookie` (RFC 9113 section 8.2.3), `, ` for the rest.
fn echo_headers(fields: &Fields<'_>) -> Json {
    let mut echoed: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in fields.iter() {
        let name = name.to_ascii_lowercase();
        let value = String::from_utf8_lossy(value);
        let separator = if name == "cookie" { "; " } else { ", " };
        echoed
            .entry(name)
            .and_modify(|joined| {
                joined.push_str(separator);
                joined.push_str(&value);
            })
            .or_insert_with(|| value.into_owned());
    }
    json(200, &echoed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The endpoints called with an HTTP/1.1 request's bytes for its fields.
    fn reply_to(api: Api, method: Method, request: &[u8], query: &[u8], body: &[u8]) -> Json {
        super::reply_to(api, method, || Fields::of(request), query, body)
    }

    fn call(method: Method, api: Api, request: &[u8], query: &[u8], body: &[u8]) -> (u16, Value) {
        let reply = reply_to(api, method, request, query, body);
        let json = serde_json::from_slice(&reply.body).expect("the body is JSON");
        (reply.status, json)
    }

    fn field<'a>(reply: &'a Json, name: &str) -> Option<&'a str> {
        reply
            .fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn routes() {
        assert_eq!(Api::of(b"login"), Api::Login);
        assert_eq!(Api::of(b"me"), Api::Me);
        assert_eq!(Api::of(b"users"), Api::Users);
        assert_eq!(Api::of(b"echo-headers"), Api::EchoHeaders);
        assert_eq!(Api::of(b"users/7"), Api::User(Some(7)));
        assert_eq!(Api::of(b"users/0"), Api::User(Some(0)));
        assert_eq!(
            Api::of(b"users/99999999999999999999999"),
            Api::User(Some(u64::MAX))
        );
        assert_eq!(Api::of(b"users/abc"), Api::User(None));
        assert_eq!(Api::of(b"users/-1"), Api::User(None));
        assert_eq!(Api::of(b"users/"), Api::User(None));
        assert_eq!(Api::of(b"users/7/x"), Api::NotFound);
        assert_eq!(Api::of(b""), Api::NotFound);
        assert_eq!(Api::of(b"nope"), Api::NotFound);
    }

    #[test]
    fn cookie_pairs() {
        let all = |field: &'static [u8]| cookies(field).collect::<Vec<_>>();
        assert_eq!(all(b"session=sess-bob"), [(&b"session"[..], &b"sess-bob"[..])]);
        assert_eq!(
            all(b"a=1; session=sess-bob;c=3"),
            [
                (&b"a"[..], &b"1"[..]),
                (&b"session"[..], &b"sess-bob"[..]),
                (&b"c"[..], &b"3"[..])
            ]
        );
        // Values may hold `=`; only the first one splits.
        assert_eq!(all(b"t=a=b=="), [(&b"t"[..], &b"a=b=="[..])]);
        assert_eq!(all(b" q = \"quoted\" "), [(&b"q"[..], &b"quoted"[..])]);
        assert_eq!(all(b"e="), [(&b"e"[..], &b""[..])]);
        assert_eq!(all(b"novalue; ;;x=1"), [(&b"x"[..], &b"1"[..])]);
        assert_eq!(all(b""), []);
        assert_eq!(all(b"\""), []);
        assert_eq!(all(b"a=\""), [(&b"a"[..], &b"\""[..])]);
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token(b"Bearer tok-bob"), Some(&b"tok-bob"[..]));
        assert_eq!(bearer_token(b"  bearer   tok-bob "), Some(&b"tok-bob"[..]));
        assert_eq!(bearer_token(b"Basic Ym9iOnNlY3JldA=="), None);
        assert_eq!(bearer_token(b"Bearer"), None);
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b""), None);
    }

    #[test]
    fn login() {
        let reply = reply_to(
            Api::Login,
            Method::Post,
            b"",
            b"",
            br#"{"username":"bob","password":"secret","extra":1}"#,
        );
        assert_eq!(reply.status, 200);
        assert_eq!(
            serde_json::from_slice::<Value>(&reply.body).unwrap(),
            json!({"token": "tok-bob", "user": "bob"})
        );
        assert_eq!(
            field(&reply, "Set-Cookie"),
            Some("session=sess-bob; Path=/; HttpOnly")
        );

        let wrong = reply_to(
            Api::Login,
            Method::Post,
            b"",
            b"",
            br#"{"username":"bob","password":"guess"}"#,
        );
        assert_eq!(wrong.status, 401);
        assert_eq!(field(&wrong, "Set-Cookie"), None);
        assert_eq!(field(&wrong, "WWW-Authenticate"), Some("Bearer"));

        for bad in [
            &b""[..],
            b"not json",
            b"[\"bob\",\"secret\"]",
            b"{\"username\":\"bob\"}",
            b"{\"password\":\"secret\"}",
            b"{\"username\":5,\"password\":\"secret\"}",
            b"{\"username\":\"a b\",\"password\":\"secret\"}",
            b"{\"username\":\"a;b\",\"password\":\"secret\"}",
            b"{\"username\":\"\",\"password\":\"secret\"}",
            b"{\"username\":\"bob\\r\\nX: y\",\"password\":\"secret\"}",
        ] {
            let (status, json) = call(Method::Post, Api::Login, b"", b"", bad);
            assert_eq!(status, 400, "{}", String::from_utf8_lossy(bad));
            assert!(json["error"].is_string());
        }
        let long = format!(r#"{{"username":"{}","password":"secret"}}"#, "a".repeat(257));
        assert_eq!(call(Method::Post, Api::Login, b"", b"", long.as_bytes()).0, 400);
        assert_eq!(call(Method::Get, Api::Login, b"", b"", b"").0, 405);
    }

    #[test]
    fn me() {
        let me = |head: &str| {
            let request = format!("GET /api/me HTTP/1.1\r\n{head}\r\n");
            call(Method::Get, Api::Me, request.as_bytes(), b"", b"")
        };
        let bob = (200, json!({"user": "bob"}));
        assert_eq!(me("Cookie: session=sess-bob\r\n"), bob);
        assert_eq!(me("Cookie: a=1; session=sess-bob; b=2\r\n"), bob);
        assert_eq!(me("Cookie: a=1\r\ncookie: session=sess-bob\r\n"), bob);
        assert_eq!(me("Cookie: session=junk; session=sess-bob\r\n"), bob);
        assert_eq!(me("Authorization: Bearer tok-bob\r\n"), bob);
        assert_eq!(
            me("Cookie: session=sess-ann\r\nAuthorization: Bearer tok-bob\r\n"),
            (200, json!({"user": "ann"})),
            "the cookie first"
        );
        for anonymous in [
            "",
            "Cookie: session=bob\r\n",
            "Cookie: session=sess-\r\n",
            "Cookie: other=sess-bob\r\n",
            "Cookie: xsession=sess-bob\r\n",
            "Authorization: Bearer sess-bob\r\n",
            "Authorization: Basic tok-bob\r\n",
            "Authorization: Bearer tok-\r\n",
        ] {
            assert_eq!(me(anonymous).0, 401, "{anonymous:?}");
        }
        assert_eq!(call(Method::Post, Api::Me, b"", b"", b"").0, 405);
    }

    #[test]
    fn user_pages() {
        let page = |query: &[u8]| call(Method::Get, Api::Users, b"", query, b"");
        let ids = |json: &Value| -> Vec<u64> {
            json["users"]
                .as_array()
                .unwrap()
                .iter()
                .map(|u| u["id"].as_u64().unwrap())
                .collect()
        };
        let (status, first) = page(b"");
        assert_eq!(status, 200);
        assert_eq!(ids(&first), (1..=10).collect::<Vec<_>>());
        assert_eq!(first["total"], 100);
        assert_eq!(
            first["users"][0],
            json!({"id": 1, "name": "user-1", "email": "user-1@example.test"})
        );
        assert_eq!(page(b"page=1").1, first);
        assert_eq!(ids(&page(b"x=y&page=2&page=3").1), (11..=20).collect::<Vec<_>>());
        assert_eq!(ids(&page(b"page=10").1), (91..=100).collect::<Vec<_>>());
        for past in [&b"page=11"[..], b"page=18446744073709551615"] {
            let (status, json) = page(past);
            assert_eq!(status, 200);
            assert_eq!(json, json!({"users": [], "total": 100}));
        }
        for bad in [
            &b"page=0"[..],
            b"page=",
            b"page",
            b"page=two",
            b"page=-1",
            b"page=99999999999999999999",
        ] {
            assert_eq!(page(bad).0, 400, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn users_keep_their_field_order() {
        let reply = user(Some(7));
        assert_eq!(
            reply.body,
            br#"{"id":7,"name":"user-7","email":"user-7@example.test"}"#
        );
    }

    #[test]
    fn one_user() {
        let get = |id| call(Method::Get, Api::User(id), b"", b"", b"");
        assert_eq!(
            get(Some(7)),
            (
                200,
                json!({"id": 7, "name": "user-7", "email": "user-7@example.test"})
            )
        );
        assert_eq!(get(Some(100)).0, 200);
        assert_eq!(get(Some(0)), (404, json!({"error": "no such user"})));
        assert_eq!(get(Some(101)).0, 404);
        assert_eq!(get(Some(u64::MAX)).0, 404);
        assert_eq!(get(None).0, 400);
        assert_eq!(call(Method::Post, Api::User(Some(7)), b"", b"", b"").0, 405);
    }

    #[test]
    fn create() {
        let post = |body: &[u8]| call(Method::Post, Api::Users, b"", b"", body);
        assert_eq!(
            post(br#"{"name":"ann","job":"tester"}"#),
            (201, json!({"id": 101, "name": "ann", "created": true}))
        );
        for bad in [&b""[..], b"{", b"[]", b"\"ann\"", b"{}", b"{\"name\":1}"] {
            assert_eq!(post(bad).0, 400, "{}", String::from_utf8_lossy(bad));
        }
        let reply = reply_to(Api::Users, Method::Other, b"", b"", b"");
        assert_eq!(reply.status, 405);
        assert_eq!(field(&reply, "Allow"), Some("GET, HEAD, POST"));
    }

    #[test]
    fn echoed_headers() {
        let request = b"POST /api/echo-headers HTTP/1.1\r\nHost: t\r\nX-Trace: abc\r\n\
                        Cookie: a=1\r\nCOOKIE: b=2\r\nAccept: x\r\naccept: y\r\n\r\n";
        let (status, json) = call(Method::Post, Api::EchoHeaders, request, b"", b"");
        assert_eq!(status, 200);
        assert_eq!(
            json,
            json!({"host": "t", "x-trace": "abc", "cookie": "a=1; b=2", "accept": "x, y"})
        );
    }

    #[test]
    fn unknown_api_paths() {
        assert_eq!(
            call(Method::Get, Api::NotFound, b"", b"", b""),
            (404, json!({"error": "not found"}))
        );
    }
}
