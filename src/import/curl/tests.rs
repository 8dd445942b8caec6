//! `volley import curl` on command lines as browsers copy them and as
//! people type them.

use super::*;

fn plan(text: &str) -> Result<Plan, Problem> {
    let input = Input {
        name: "curl.txt".into(),
        text: text.into(),
    };
    import(&input, &Options::default())
}

fn requests(plan: &Plan) -> Vec<&Request> {
    plan.items
        .iter()
        .filter_map(|i| match &i.step {
            Step::Request(r) => Some(r),
            Step::Delay(_) => None,
        })
        .collect()
}

#[test]
fn a_browser_copy_becomes_a_request() {
    let plan = plan(
        "curl 'http://127.0.0.1:3000/api/users?page=2' \\\n  -H 'accept: */*' \\\n  -H 'sec-ch-ua: \"Chromium\"' \\\n  -H 'authority: 127.0.0.1:3000' \\\n  -b 'session=sess-bob' \\\n  --data-raw $'{\"name\":\"O\\'Brien\"}' \\\n  --compressed ;\ncurl 'http://127.0.0.1:3000/api/me' -X 'DELETE' -H 'x-empty;'",
    )
    .unwrap();
    assert_eq!(plan.base, "http://127.0.0.1:3000");
    let r = requests(&plan);
    assert_eq!(r[0].method, "POST");
    assert_eq!(r[0].url, "/api/users?page=2");
    assert_eq!(
        r[0].headers,
        [
            ("accept".to_string(), "*/*".to_string()),
            ("Cookie".into(), "session=sess-bob".into()),
            ("Accept-Encoding".into(), COMPRESSED.into()),
            ("Content-Type".into(), "application/x-www-form-urlencoded".into()),
        ]
    );
    assert_eq!(r[0].body, Some(Body::Bytes(b"{\"name\":\"O'Brien\"}".to_vec())));
    assert_eq!((r[1].method.as_str(), r[1].body.as_ref()), ("DELETE", None));
    assert_eq!(r[1].headers, [("x-empty".to_string(), String::new())]);
    assert!(
        plan.header
            .iter()
            .any(|h| h.contains("sec-ch-ua") && h.contains("authority")),
        "{:?}",
        plan.header
    );
}

#[test]
fn data_options_as_curl_sends_them() {
    let plan = plan(
        "curl -sS http://h/a -d a=1 -d 'b=2' --data-urlencode 'q=x y&z' --data-urlencode =v/w\n\
         curl -G http://h/b?x=1 -d y=2\n\
         curl --json '{\"a\":1}' h/c -XPUT\n\
         curl -I http://h/d -u bob:secret\n\
         curl -A agent -e 'http://h/;auto' --url http://h/e -k",
    )
    .unwrap();
    let r = requests(&plan);
    assert_eq!(r[0].body, Some(Body::Bytes(b"a=1&b=2&q=x+y%26z&v%2Fw".to_vec())));
    assert_eq!(
        (r[1].method.as_str(), r[1].url.as_str(), r[1].body.as_ref()),
        ("GET", "/b?x=1&y=2", None)
    );
    assert_eq!(r[2].method, "PUT");
    assert!(
        r[2].headers
            .contains(&("Content-Type".into(), "application/json".into()))
    );
    assert!(
        r[2].headers
            .contains(&("Accept".into(), "application/json".into()))
    );
    assert_eq!(r[3].method, "HEAD");
    assert_eq!(
        r[3].headers,
        [(
            "Authorization".to_string(),
            "Basic {{ CURL_BASIC_AUTH }}".to_string()
        )]
    );
    assert_eq!(
        r[4].headers,
        [
            ("User-Agent".to_string(), "agent".to_string()),
            ("Referer".into(), "http://h/".into())
        ]
    );
    let header = plan.header.join("\n");
    assert!(!header.contains("secret") && !header.contains("bob"), "{header}");
    assert!(header.contains("CURL_BASIC_AUTH"), "{header}");
    assert!(header.contains("--insecure"), "{header}");
    assert!(header.contains("-s, -S"), "{header}");
}

#[test]
fn globs_brackets_and_templates() {
    let r = plan("curl 'http://h/a\\[1\\]?q=\\{\\{x\\}\\}'").unwrap();
    assert_eq!(requests(&r)[0].url, "/a[1]?q=%7B%7Bx%7D%7D");
    assert!(
        plan("curl 'http://h/a[1-3]'")
            .unwrap_err()
            .message
            .contains("globbing")
    );
    let ipv6 = plan("curl -g 'http://[::1]:8080/x{y}'").unwrap();
    assert_eq!(ipv6.base, "http://[::1]:8080");
    assert_eq!(plan("curl 'http://[::1]/z'").unwrap().base, "http://[::1]");
}

#[test]
fn shell_variables_become_environment_references() {
    let plan = plan(
        "curl \"https://api.test/v1/$ACCOUNT/items?limit=${LIMIT}\" \\\n  -H \"Authorization: Bearer $API_KEY\" \\\n  -d \"{\\\"owner\\\": \\\"$OWNER\\\"}\"",
    )
    .unwrap();
    let r = requests(&plan)[0];
    assert_eq!(r.url, "/v1/{{ ACCOUNT }}/items?limit={{ LIMIT }}");
    assert_eq!(
        r.headers[0],
        ("Authorization".into(), "Bearer {{ API_KEY }}".into())
    );
    assert_eq!(
        r.body,
        Some(Body::Template("{\"owner\": \"{{ OWNER }}\"}".into()))
    );
    let header = plan.header.join("\n");
    assert!(header.contains("set API_KEY, OWNER, ACCOUNT, LIMIT"), "{header}");
    // A variable that names the server is what --base gives.
    let input = Input {
        name: "curl.txt".into(),
        text: "curl \"$BASE_URL/users\"".into(),
    };
    let options = Options {
        base: Some(Base::parse("http://127.0.0.1:3000/api").unwrap()),
        ..Options::default()
    };
    let based = import(&input, &options).unwrap();
    assert_eq!(
        (based.base.as_str(), requests(&based)[0].url.as_str()),
        ("http://127.0.0.1:3000", "/api/users")
    );
}

#[test]
fn form_fields_and_files_are_a_multipart_body() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "line one\n").unwrap();
    let value = dir.path().join("v");
    std::fs::write(&value, "from a file").unwrap();
    let plan = plan(&format!(
        "curl http://h.test/up -F name=ann -F 'doc=@{};type=text/markdown' -F 'raw=@{}' -F 'v=<{}' --form-string 'lit=@x;type=y'",
        file.display(),
        file.display(),
        value.display()
    ))
    .unwrap();
    let r = requests(&plan)[0];
    assert_eq!(r.method, "POST");
    let boundary = "------------------------volley0000000000000000";
    assert_eq!(
        r.headers,
        [(
            "Content-Type".to_string(),
            format!("multipart/form-data; boundary={boundary}")
        )]
    );
    let expected = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nann\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"doc\"; filename=\"notes.txt\"\r\nContent-Type: text/markdown\r\n\r\nline one\n\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"raw\"; filename=\"notes.txt\"\r\nContent-Type: text/plain\r\n\r\nline one\n\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"v\"\r\n\r\nfrom a file\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"lit\"\r\n\r\n@x;type=y\r\n\
         --{boundary}--\r\n"
    );
    assert_eq!(r.body, Some(Body::Bytes(expected.into_bytes())));
}

#[test]
fn windows_copy_as_curl_cmd_is_read() {
    let plan = plan(
        "curl ^\"http://h.test/api?q=1^\" ^\r\n  -H ^\"accept: application/json^\" ^\r\n  --data-raw ^\"^{^\\^\"a^\\^\":1^}^\"",
    )
    .unwrap();
    let r = requests(&plan)[0];
    assert_eq!((r.method.as_str(), r.url.as_str()), ("POST", "/api?q=1"));
    assert_eq!(r.body, Some(Body::Bytes(b"{\"a\":1}".to_vec())));
    assert!(plan.header[0].contains("cmd.exe"), "{:?}", plan.header);
}

#[test]
fn other_origins_are_left_out_and_said() {
    let plan = plan("curl http://a.test/1; curl http://b.test/2; curl http://a.test/3").unwrap();
    assert_eq!(requests(&plan).len(), 2);
    assert!(
        plan.header.iter().any(|h| h.contains("http://b.test")),
        "{:?}",
        plan.header
    );
}

#[test]
fn unknown_options_and_bad_commands_are_errors() {
    for (text, says) in [
        ("curl -F a http://h/", "not a form field"),
        ("curl -F a=b -d c http://h/", "cannot be mixed"),
        ("curl --proxy-user a:b http://h/", "'--proxy-user'"),
        ("curl $BASE/a", "--base"),
        ("curl -X \"$M\" http://h/", "not a shell variable"),
        ("curl -sZ http://h/", "'-Z'"),
        ("wget http://h/", "not curl"),
        ("curl -X", "needs a value"),
        ("curl -b cookies.txt http://h/", "from a file"),
        ("curl -H nonsense http://h/", "not a header"),
        ("curl -s", "no URL"),
        ("", "no curl command"),
    ] {
        let problem = plan(text).unwrap_err();
        assert!(problem.message.contains(says), "{text}: {problem}");
    }
    assert_eq!(
        plan("curl http://h/\ncurl --nope http://h/").unwrap_err().place,
        "line 2"
    );
}
