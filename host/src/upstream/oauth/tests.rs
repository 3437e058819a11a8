use super::*;

fn url(text: &str) -> Url {
    Url::parse(text).expect("a URL")
}

#[test]
fn a_bearer_challenge_is_read_with_quoted_and_bare_values() {
    let header = r#"Bearer error="invalid_token", error_description="Missing Authorization header", resource_metadata="http://localhost:3000/.well-known/oauth-protected-resource/mcp""#;
    let challenge = parse_challenge(header).expect("a Bearer challenge");
    assert_eq!(
        challenge.resource_metadata.as_deref(),
        Some("http://localhost:3000/.well-known/oauth-protected-resource/mcp")
    );
    assert_eq!((challenge.error.as_deref(), challenge.scope.as_deref()), (Some("invalid_token"), None));
    assert!(!challenge.insufficient_scope());

    let step_up = parse_challenge(r#"Bearer scope="mcp:basic mcp:write", error="insufficient_scope""#).expect("one");
    assert_eq!(step_up.scope.as_deref(), Some("mcp:basic mcp:write"));
    assert!(step_up.insufficient_scope());

    let bare = parse_challenge("bearer error=invalid_token,scope=read").expect("case-insensitive scheme");
    assert_eq!((bare.error.as_deref(), bare.scope.as_deref()), (Some("invalid_token"), Some("read")));
    let escaped = parse_challenge(r#"Bearer scope="a \"b\" c""#).expect("one");
    assert_eq!(escaped.scope.as_deref(), Some(r#"a "b" c"#));
}

#[test]
fn only_the_bearer_challenge_of_several_counts() {
    let header = r#"Basic realm="x", Bearer scope="s", resource_metadata="https://h/m", DPoP algs="ES256""#;
    let challenge = parse_challenge(header).expect("the Bearer one");
    assert_eq!((challenge.scope.as_deref(), challenge.resource_metadata.as_deref()), (Some("s"), Some("https://h/m")));
    assert_eq!(parse_challenge(r#"Basic realm="bearer""#), None, "a quoted word is not a scheme");
    assert_eq!(parse_challenge("Bearer"), Some(Challenge::default()), "no parameters at all");
    assert_eq!(parse_challenge("Bearerish x=1"), None);
}

#[test]
fn resource_metadata_is_looked_for_where_the_challenge_says_else_path_then_root() {
    let server = url("http://localhost:3000/mcp");
    let named =
        Challenge { resource_metadata: Some("http://localhost:3000/custom/meta.json".into()), ..Default::default() };
    assert_eq!(resource_metadata_urls(&server, Some(&named)), ["http://localhost:3000/custom/meta.json"]);
    assert_eq!(
        resource_metadata_urls(&server, Some(&Challenge::default())),
        [
            "http://localhost:3000/.well-known/oauth-protected-resource/mcp",
            "http://localhost:3000/.well-known/oauth-protected-resource"
        ]
    );
    assert_eq!(
        resource_metadata_urls(&url("https://mcp.example.com/"), None),
        ["https://mcp.example.com/.well-known/oauth-protected-resource"]
    );
}

#[test]
fn an_issuer_with_a_path_is_looked_up_three_ways_one_without_two() {
    assert_eq!(
        authorization_server_metadata_urls(&url("http://localhost:4000")),
        [
            "http://localhost:4000/.well-known/oauth-authorization-server",
            "http://localhost:4000/.well-known/openid-configuration"
        ]
    );
    assert_eq!(
        authorization_server_metadata_urls(&url("http://localhost:4000/tenant1")),
        [
            "http://localhost:4000/.well-known/oauth-authorization-server/tenant1",
            "http://localhost:4000/.well-known/openid-configuration/tenant1",
            "http://localhost:4000/tenant1/.well-known/openid-configuration"
        ]
    );
}

#[test]
fn a_resource_must_be_the_server_or_hold_it() {
    let server = url("http://localhost:3000/mcp");
    for (resource, holds) in [
        ("http://localhost:3000/mcp", true),
        ("http://localhost:3000/mcp/", true),
        ("http://localhost:3000", true),
        ("https://evil.example.com/mcp", false),
        ("http://localhost:3001/mcp", false),
        ("https://localhost:3000/mcp", false),
        ("http://localhost:3000/mcp2", false),
        ("http://localhost:3000/mcp#x", false),
        ("not a url", false),
    ] {
        assert_eq!(resource_holds(resource, &server), holds, "{resource}");
    }
}

#[test]
fn scopes_come_from_the_challenge_else_all_supported_else_none() {
    let supported = ["mcp:basic".to_owned(), "mcp:read".to_owned(), "mcp:write".to_owned()];
    assert_eq!(scope_to_request(Some("mcp:basic"), Some(&supported)).as_deref(), Some("mcp:basic"));
    assert_eq!(scope_to_request(None, Some(&supported)).as_deref(), Some("mcp:basic mcp:read mcp:write"));
    assert_eq!(scope_to_request(Some("  "), None), None);
    assert_eq!(scope_to_request(None, Some(&[])), None);
    assert_eq!(stepped_up("mcp:basic", "mcp:basic mcp:write"), "mcp:basic mcp:write");
    assert_eq!(stepped_up("", "mcp:admin"), "mcp:admin");
}

#[test]
fn pkce_is_s256_of_an_unreserved_verifier() {
    // RFC 7636, appendix B.
    let known = Pkce::of("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".to_owned());
    assert_eq!(known.challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    let fresh = Pkce::new().expect("randomness");
    assert_eq!(fresh.verifier.len(), 64);
    assert!(fresh.verifier.chars().all(|c| c.is_ascii_alphanumeric()));
    assert_ne!(fresh.verifier, Pkce::new().expect("randomness").verifier);
}

#[test]
fn the_token_endpoint_method_follows_the_registration_then_the_server() {
    let basic_and_post = ["client_secret_basic".to_owned(), "client_secret_post".to_owned()];
    let post_only = ["client_secret_post".to_owned()];
    assert_eq!(ClientAuth::choose(Some("client_secret_post"), Some(&basic_and_post), true), ClientAuth::Post);
    assert_eq!(ClientAuth::choose(Some("none"), None, false), ClientAuth::None);
    assert_eq!(ClientAuth::choose(None, Some(&basic_and_post), true), ClientAuth::Basic);
    assert_eq!(ClientAuth::choose(None, Some(&post_only), true), ClientAuth::Post);
    assert_eq!(ClientAuth::choose(None, None, true), ClientAuth::Basic, "nothing listed: Basic, the default");
    assert_eq!(ClientAuth::choose(Some("client_secret_basic"), None, false), ClientAuth::None, "no secret to send");
}

#[test]
fn basic_credentials_are_form_encoded_before_base64() {
    // RFC 6749's example of client credentials.
    assert_eq!(basic_credentials("s6BhdRkqt3", "gX1fBat3bV"), "Basic czZCaGRSa3F0MzpnWDFmQmF0M2JW");
    let odd = basic_credentials("a b:c", "p@ss");
    let decoded = base64::engine::general_purpose::STANDARD.decode(odd.trim_start_matches("Basic ")).expect("base64");
    assert_eq!(String::from_utf8(decoded).expect("utf8"), "a%20b%3Ac:p%40ss");
}

#[test]
fn the_authorization_url_carries_every_parameter_and_keeps_the_resource_as_written() {
    let request = AuthorizationRequest {
        client_id: "test-client-id",
        redirect_uri: "http://127.0.0.1:19387/myspace-butler/oauth/callback",
        state: "st&1",
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        resource: "http://localhost:3000",
        scope: Some("mcp:basic mcp:write"),
    };
    let built = authorization_url("http://localhost:4000/authorize?tenant=a", &request).expect("a URL");
    let parsed = url(&built);
    let pairs: Vec<(String, String)> = parsed.query_pairs().map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    let get = |key: &str| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
    assert_eq!(get("tenant"), Some("a"), "the endpoint's own parameters stay");
    assert_eq!(get("response_type"), Some("code"));
    assert_eq!(get("code_challenge_method"), Some("S256"));
    assert_eq!(get("state"), Some("st&1"));
    assert_eq!(get("resource"), Some("http://localhost:3000"), "no slash added");
    assert_eq!(get("scope"), Some("mcp:basic mcp:write"));
    let without = AuthorizationRequest { scope: None, ..request };
    assert!(!authorization_url("http://localhost:4000/authorize", &without).expect("a URL").contains("scope="));
    assert!(authorization_url("not a url", &without).is_err());
}

#[test]
fn authorization_server_metadata_must_name_itself_and_keep_to_the_url_rule() {
    use super::requests::{AuthorizationServer, FlowError, check_server};
    let good = AuthorizationServer {
        issuer: "https://as.example".into(),
        authorization_endpoint: "https://as.example/authorize".into(),
        token_endpoint: "https://as.example/token".into(),
        registration_endpoint: Some("http://127.0.0.1:9/register".into()),
        token_endpoint_auth_methods_supported: None,
        code_challenge_methods_supported: Some(vec!["S256".into()]),
        revocation_endpoint: None,
    };
    assert_eq!(check_server(&good, "https://as.example"), Ok(()));
    assert_eq!(check_server(&good, "https://as.example/"), Ok(()), "a trailing slash aside");
    let claimed = check_server(&good, "http://127.0.0.1:18141").expect_err("another issuer");
    assert!(matches!(claimed, FlowError::IssuerMismatch { .. }), "{claimed}");
    assert!(claimed.to_string().contains("https://as.example"), "{claimed}");
    // A claim that differs only in a part a shown URL leaves out is shown whole.
    let sneaky = AuthorizationServer { issuer: "https://as.example#x".into(), ..good.clone() };
    let refused = check_server(&sneaky, "https://as.example").expect_err("a fragment is another issuer");
    assert!(refused.to_string().contains("says its issuer is https://as.example#x"), "{refused}");

    for (which, bad) in [
        (
            "authorization_endpoint",
            AuthorizationServer { authorization_endpoint: "file:///etc/passwd".into(), ..good.clone() },
        ),
        ("token_endpoint", AuthorizationServer { token_endpoint: "http://10.255.255.1/token".into(), ..good.clone() }),
        (
            "revocation_endpoint",
            AuthorizationServer { revocation_endpoint: Some("http://as.example/r".into()), ..good.clone() },
        ),
    ] {
        let refused = check_server(&bad, "https://as.example").expect_err(which);
        assert!(matches!(refused, FlowError::EndpointNotAllowed { which: w, .. } if w == which), "{refused}");
    }
    let no_pkce = AuthorizationServer { code_challenge_methods_supported: Some(vec!["plain".into()]), ..good };
    assert!(matches!(check_server(&no_pkce, "https://as.example"), Err(FlowError::NoPkce(_))));
}
