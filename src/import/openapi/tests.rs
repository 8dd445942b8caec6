use super::*;

const GREENHOUSE: &str = include_str!("../../../tests/fixtures/import/greenhouse-3.0.yaml");
const BOOKSHOP: &str = include_str!("../../../tests/fixtures/import/bookshop-3.1.json");

fn import_with(text: &str, openapi: Options, base: Option<&str>) -> Result<Plan, Problem> {
    let input = Input {
        name: "api.yaml".into(),
        text: text.into(),
    };
    let all = All {
        openapi,
        base: base.map(|b| Base::parse(b).unwrap()),
        ..All::default()
    };
    import(&input, &all)
}

fn request<'p>(plan: &'p Plan, name: &str) -> &'p Request {
    plan.items
        .iter()
        .find_map(|i| match &i.step {
            Step::Request(r) if i.name == name => Some(r),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no item {name}"))
}

fn body(request: &Request) -> serde_json::Value {
    match &request.body {
        Some(Body::Bytes(bytes)) => serde_json::from_slice(bytes).unwrap(),
        other => panic!("no JSON body: {other:?}"),
    }
}

#[test]
fn a_30_description_as_a_plan() {
    let plan = import_with(GREENHOUSE, Options::default(), None).unwrap();
    assert_eq!(plan.base, "https://greenhouse.example");
    assert_eq!(plan.items.len(), 15);
    assert_eq!(plan.items[0].name, "listBeds");
    assert_eq!(plan.items[0].tags, ["beds"]);
    assert_eq!(
        plan.items[0].comment.as_deref(),
        Some("List the beds in one state")
    );
    assert_eq!(
        request(&plan, "listBeds").url,
        "/api/v2/beds?state=fallow",
        "the default before the enum's first value"
    );
    let plant = request(&plan, "plantBed");
    assert_eq!(
        (plant.method.as_str(), plant.url.as_str()),
        ("POST", "/api/v2/beds")
    );
    assert_eq!(
        body(plant),
        serde_json::json!({"id": 7, "crop": "basil", "soil": {"id": 2, "kind": "loam"},
            "rows": ["string"], "sensors": [{"id": 1, "name": "string"}], "state": "growing"})
    );
    assert!(
        plant
            .headers
            .contains(&("Authorization".into(), "Bearer {{ GARDEN_AUTH }}".into()))
    );
    let search = request(&plan, "searchBeds");
    assert_eq!(search.url, "/api/v2/beds/search?crop=basil&crop=chard");
    assert!(search.headers.is_empty(), "no security, no header");
    assert_eq!(
        request(&plan, "getBed").headers,
        [("X-Api-Key".to_string(), "{{ API_KEY }}".to_string())],
        "the first of the alternatives"
    );
    assert_eq!(
        request(&plan, "relabelBed").url,
        "/api/v2/beds/7",
        "optional, no example: left out; the path's own parameter"
    );
    assert_eq!(
        request(&plan, "dropCalibration").url,
        "/api/v2/sensors/s-1/calibrations/3"
    );
    assert_eq!(request(&plan, "signIn").url, "/api/v2/crew/signin?who=ana");
    assert_eq!(request(&plan, "getSensor").url, "/api/v2/sensors/north%20wall");
    assert_eq!(request(&plan, "uploadPhoto").body, None);
    let shift = request(&plan, "bookShift");
    assert_eq!(
        shift.headers,
        [("Content-Type".to_string(), "application/json".to_string())]
    );
    assert_eq!(body(shift)["status"], "confirmed");
    assert!(body(request(&plan, "recordReadings")).is_array());
    let header = plan.header.join("\n");
    assert!(
        header.contains("GARDEN_AUTH") && header.contains("API_KEY"),
        "{header}"
    );
    assert!(header.contains("uploadPhoto"), "{header}");
}

#[test]
fn a_31_description_with_refs_all_of_and_one_of() {
    let plan = import_with(BOOKSHOP, Options::default(), None).unwrap();
    assert_eq!(
        plan.base, "http://127.0.0.1:8080",
        "the server's variables at their defaults"
    );
    assert_eq!(plan.items.len(), 25);
    let book = body(request(&plan, "replaceBook"));
    // allOf: Product's properties (less the read-only id), then Book's.
    let keys: Vec<&String> = book.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 8, "{book}");
    assert!(book.get("id").is_none(), "read-only properties are not sent");
    assert_eq!(
        book["price"],
        serde_json::json!({"amount": 1.0, "currency": "EUR"})
    );
    assert_eq!(
        book["category"]["children"][0]["name"], "string",
        "a recursive schema stops"
    );
    assert_eq!(
        body(request(&plan, "createBook"))["title"],
        "The Hobbit",
        "a $ref'd example"
    );
    assert_eq!(
        body(request(&plan, "payOrder"))["kind"],
        "card",
        "oneOf takes the first"
    );
    let order = body(request(&plan, "placeOrder"));
    assert_eq!(order["shipping"]["city"], "Lyon", "anyOf skips null");
    let review = request(&plan, "listReviews");
    assert_eq!(
        review.url, "/v2/books/3fa85f64-5717-4562-b3fc-2c963f66afa6/reviews",
        "a $ref'd path item"
    );
    assert!(review.headers.is_empty(), "security: [] is public");
    assert_eq!(request(&plan, "getAuthor").url, "/v2/authors/100");
    assert_eq!(
        request(&plan, "getOrder").url,
        "/v2/orders/1",
        "exclusiveMinimum 0"
    );
    assert_eq!(
        request(&plan, "listBooks").url,
        "/v2/books?page=1&limit=1&sort=title&lang=en&lang=fr"
    );
    assert_eq!(
        request(&plan, "search").url,
        "/v2/search?q=string&in=title&in=title&year=1937&lang=en&key={{ API_KEY }}"
    );
    assert_eq!(
        request(&plan, "me").headers,
        [("Authorization".to_string(), "Basic {{ BASIC_AUTH }}".to_string())]
    );
    assert_eq!(
        request(&plan, "updateMe").body,
        Some(Body::Bytes(b"name=Ann+Lee&newsletter=true".to_vec()))
    );
    assert_eq!(
        request(&plan, "saveNotes").body,
        Some(Body::Bytes(b"read: 1e3 pages; yes".to_vec()))
    );
}

#[test]
fn tags_operations_and_base_choose() {
    let plan = import_with(
        BOOKSHOP,
        Options {
            tags: vec!["catalogue".into()],
            ..Options::default()
        },
        Some("https://staging.test"),
    )
    .unwrap();
    let names: Vec<&str> = plan.items.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["listBooks", "listAuthors", "categoryTree", "search"]);
    assert_eq!(plan.base, "https://staging.test");
    assert_eq!(
        request(&plan, "listAuthors").url,
        "/authors?page=1",
        "--base replaces the server, path and all"
    );
    let plan = import_with(
        GREENHOUSE,
        Options {
            operations: vec!["sensorSummary".into(), "signOut".into()],
            ..Options::default()
        },
        None,
    )
    .unwrap();
    assert_eq!(plan.items.len(), 2);
    let missing = import_with(
        GREENHOUSE,
        Options {
            operations: vec!["nope".into()],
            ..Options::default()
        },
        None,
    );
    assert!(missing.unwrap_err().message.contains("--operation nope"));
    assert!(
        import_with(
            GREENHOUSE,
            Options {
                tags: vec!["nope".into()],
                ..Options::default()
            },
            None
        )
        .is_err()
    );
}

#[test]
fn swagger_2() {
    let text = r##"{"swagger": "2.0", "info": {"title": "Old", "version": "1"}, "host": "old.test:8080", "basePath": "/api", "schemes": ["http"],
        "securityDefinitions": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"}}, "security": [{"key": []}],
        "paths": {"/things/{id}": {"post": {"operationId": "make", "parameters": [
            {"name": "id", "in": "path", "required": true, "type": "integer", "minimum": 5},
            {"name": "body", "in": "body", "schema": {"$ref": "#/definitions/Thing"}}],
          "responses": {"200": {"description": "ok"}}}}},
        "definitions": {"Thing": {"type": "object", "properties": {"name": {"type": "string", "example": "x"}}}}}"##;
    let plan = import_with(text, Options::default(), None).unwrap();
    assert_eq!(plan.base, "http://old.test:8080");
    let make = request(&plan, "make");
    assert_eq!(make.url, "/api/things/5");
    assert_eq!(body(make), serde_json::json!({"name": "x"}));
    assert!(make.headers.contains(&("X-Key".into(), "{{ KEY }}".into())));
}

#[test]
fn broken_descriptions_say_where() {
    for (text, place, says) in [
        ("{\"paths\": {}}", "/", "not an OpenAPI description"),
        ("openapi: 3.0.0\npaths: {}\n", "/", "no server"),
        ("openapi: 2.5.0\n", "/openapi", "not supported"),
        (
            "openapi: 3.1.0\nservers: [{url: 'http://h'}]\npaths:\n  /a:\n    post:\n      requestBody:\n        $ref: '#/components/requestBodies/Nope'\n",
            "/paths/~1a/post/requestBody/$ref",
            "points nowhere",
        ),
        (
            "openapi: 3.1.0\nservers: [{url: 'http://h'}]\npaths:\n  /a:\n    get:\n      parameters: [{$ref: 'other.yaml#/p'}]\n",
            "/paths/~1a/get/parameters/0/$ref",
            "another file",
        ),
        (
            "openapi: 3.1.0\nservers: [{url: /v1}]\npaths: {}\n",
            "/servers/0",
            "relative",
        ),
        (
            "openapi: 3.1.0\nservers: [{url: 'http://h'}]\npaths:\n  /a/{id}:\n    get: {}\n",
            "/paths/~1a~1{id}/get",
            "not declared",
        ),
        ("openapi: [1\n", "line 2", "not valid YAML"),
        (
            "openapi: 3.1.0\nservers: [{url: 'http://h'}]\npaths:\n  /a:\n    get:\n      security: [{nope: []}]\n",
            "/paths/~1a/get/security/0",
            "'nope' is not defined",
        ),
    ] {
        let problem = import_with(text, Options::default(), None).unwrap_err();
        assert_eq!(problem.place, place, "{text}: {problem}");
        assert!(problem.message.contains(says), "{text}: {problem}");
    }
}

/// The descriptions the tests hold, each with the JSON Schema draft its
/// schemas follow.
const DESCRIPTIONS: &[(&str, jsonschema::Draft)] = &[
    (
        "tests/fixtures/import/greenhouse-3.0.yaml",
        jsonschema::Draft::Draft4,
    ),
    (
        "tests/fixtures/import/bookshop-3.1.json",
        jsonschema::Draft::Draft202012,
    ),
    (
        "tests/fixtures/import/forms-3.1.yaml",
        jsonschema::Draft::Draft202012,
    ),
    ("examples/openapi/volley-serve.yaml", jsonschema::Draft::Draft4),
    (
        "tests/fixtures/import/polymorphic-3.0.yaml",
        jsonschema::Draft::Draft4,
    ),
];

/// What a JSON pointer may not hold as it is in a URI's fragment.
const FRAGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'|')
    .add(b'\\')
    .add(b'^');

/// A `multipart/form-data` body's part names.
fn part_names(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    text.split("Content-Disposition: form-data; name=\"")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_string())
        .collect()
}

#[test]
fn every_generated_body_validates_against_its_schema() {
    let mut checked = 0;
    for (file, draft) in DESCRIPTIONS {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let document = doc::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
        let root = At::root(&document);
        let spec = Spec {
            root: root.clone(),
            v2: false,
        };
        let whole = document.to_json();
        for (path, item) in root.object("paths").unwrap() {
            let item = spec.resolve(item).unwrap();
            for (method, op) in item.members().unwrap() {
                let Some(body) = op.get("requestBody").filter(|_| METHODS.contains(&method)) else {
                    continue;
                };
                let body = spec.resolve(body).unwrap();
                let operation = format!("{file}: {method} {path}");
                let essence = |m: &str| m.split(';').next().unwrap().trim().to_ascii_lowercase();
                let Some((media, bytes)) = request_body_value(&spec, &body).unwrap() else {
                    // Only a media type volley makes no body for (an image).
                    for (media, _) in body.object("content").unwrap() {
                        let media = essence(media);
                        assert!(
                            !media.contains("json") && !media.contains("form") && !media.starts_with("text/"),
                            "{operation}: no body for {media}"
                        );
                    }
                    continue;
                };
                let (_, content) = body
                    .object("content")
                    .unwrap()
                    .into_iter()
                    .find(|(m, _)| essence(m) == essence(&media))
                    .unwrap();
                let Some(schema) = content.get("schema") else {
                    continue;
                };
                // The whole document, so that its `$ref`s resolve, entered at
                // the body's schema.
                let mut entry = whole.clone();
                let fragment: String = utf8_percent_encode(&schema.place(), FRAGMENT).collect();
                entry["$ref"] = format!("#{fragment}").into();
                let validator = jsonschema::options()
                    .with_draft(*draft)
                    .build(&entry)
                    .unwrap_or_else(|e| panic!("{operation}: {e}"));
                let instance: serde_json::Value = match essence(&media).as_str() {
                    "multipart/form-data" => {
                        let names = part_names(&bytes);
                        let required = spec.resolve(schema.clone()).unwrap();
                        for name in required.list("required").unwrap() {
                            let name = name.text().unwrap();
                            assert!(names.iter().any(|n| n == name), "{operation}: no part '{name}'");
                        }
                        checked += 1;
                        continue;
                    }
                    m if m.contains("json") => serde_json::from_slice(&bytes).unwrap(),
                    _ => continue,
                };
                let errors: Vec<String> = validator
                    .iter_errors(&instance)
                    .map(|e| format!("{e} at {}", e.instance_path()))
                    .collect();
                assert!(
                    errors.is_empty(),
                    "{operation}: {instance} fails its schema: {errors:#?}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 21, "every body of the five descriptions");
}

#[test]
fn an_example_written_as_json_text_is_the_body_and_form_arrays_are_repeated_parts() {
    let description = r#"{
      "openapi": "3.0.3",
      "info": {"title": "t", "version": "1"},
      "servers": [{"url": "http://127.0.0.1:3000"}],
      "paths": {
        "/pets": {
          "post": {"requestBody": {"content": {"application/json": {
            "schema": {"type": "object", "properties": {"name": {"type": "string"}}},
            "example": "{\n  \"name\": \"Fluffy\"\n}"}}}},
          "put": {"requestBody": {"content": {"application/json": {
            "schema": {"type": "string"}, "example": "{\"kept\": \"as a string\"}"}}}}
        },
        "/files": {
          "put": {"requestBody": {"content": {"multipart/form-data": {"schema": {
            "type": "object",
            "properties": {"file": {"type": "array", "items": {"type": "string"}, "example": ["a", "b"]}}
          }}}}}
        }
      }
    }"#;
    let plan = import_with(description, Options::default(), None).unwrap();
    assert_eq!(
        body(request(&plan, "POST /pets")),
        serde_json::json!({"name": "Fluffy"})
    );
    assert_eq!(
        body(request(&plan, "PUT /pets")),
        serde_json::json!("{\"kept\": \"as a string\"}")
    );
    let Some(Body::Bytes(form)) = &request(&plan, "PUT /files").body else {
        panic!("no form body");
    };
    assert_eq!(part_names(form), ["file", "file"]);
    let text = String::from_utf8_lossy(form);
    assert!(
        text.contains("\r\n\r\na\r\n") && text.contains("\r\n\r\nb\r\n"),
        "{text}"
    );
}

#[test]
fn made_up_numbers_are_multiples_where_the_schema_asks() {
    let description = r#"{
      "openapi": "3.0.3",
      "info": {"title": "t", "version": "1"},
      "servers": [{"url": "http://127.0.0.1:3000"}],
      "paths": {"/numbers": {"put": {"requestBody": {"content": {"application/json": {"schema": {
        "type": "object",
        "required": ["even", "above", "quarter"],
        "properties": {
          "even": {"type": "integer", "multipleOf": 2},
          "above": {"type": "integer", "minimum": 7, "multipleOf": 5},
          "quarter": {"type": "number", "multipleOf": 0.25, "minimum": 1.1}
        }
      }}}}}}}
    }"#;
    let plan = import_with(description, Options::default(), None).unwrap();
    assert_eq!(
        body(request(&plan, "PUT /numbers")),
        serde_json::json!({"even": 2, "above": 10, "quarter": 1.25})
    );
}
