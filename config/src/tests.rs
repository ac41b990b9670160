use super::*;

fn error_of(text: &str) -> String {
    Config::from_toml(text, Some(Path::new("steward.toml")))
        .expect_err("config should be rejected")
        .to_string()
}

#[test]
fn the_commented_default_config_equals_the_embedded_defaults() {
    let from_file = Config::from_toml(DEFAULT_CONFIG_TOML, None).unwrap();
    assert_eq!(from_file, Config::default());
    assert_eq!(from_file.daemon.shutdown_grace, Duration::from_secs(10));
    assert_eq!(from_file.lanes.max_parallel, 4);
    assert_eq!(from_file.model.provider, ModelProvider::None);
    assert_eq!(
        from_file.inbox.dedupe_retention,
        Duration::from_secs(30 * 86_400)
    );
}

#[test]
fn errors_name_the_key_and_the_line() {
    let table: &[(&str, &str, &str)] = &[
        (
            "[daemon]\nshutdown_grace_secs = 5\nshutdown_grace = 3\n",
            "daemon.shutdown_grace",
            ":3:",
        ),
        (
            "[daemon]\nshutdown_grace_secs = \"ten\"\n",
            "daemon.shutdown_grace_secs",
            ":2:",
        ),
        (
            "[daemon]\nshutdown_grace_secs = 0\n",
            "daemon.shutdown_grace_secs",
            ":2:",
        ),
        (
            "\n\n[lanes]\nmax_parallel = -1\n",
            "lanes.max_parallel",
            ":4:",
        ),
        ("[model]\nprovider = \"gpt\"\n", "model.provider", ":2:"),
        (
            "[model]\nprovider = \"anthropic\"\nmodel = \"claude\"\nmax_output_tokens = 4096\ncontext_window_tokens = 5000\n",
            "model.context_window_tokens",
            ":5:",
        ),
        ("[model]\nprovider = \"anthropic\"\n", "model.model", ":2:"),
        (
            "[[cron]]\nname = \"a\"\nschedule = \"at +1s\"\ntext = \"t\"\nmodel = \"cheap\"\n",
            "cron[0].model",
            ":5:",
        ),
        (
            "[models.cheap]\nprovider = \"anthropic\"\n",
            "models.cheap.model",
            ":2:",
        ),
        (
            "[[webhook.routes]]\nname = \"gh\"\nauth = \"bearer\"\nsecret_env = \"S\"\nmax_model_calls_per_run = 0\n",
            "webhook.routes[0].max_model_calls_per_run",
            ":5:",
        ),
        ("[budget]\ndaily_tokens = 0\n", "budget.daily_tokens", ":2:"),
        (
            "[web_search]\nbackend = \"google\"\n",
            "web_search.backend",
            ":2:",
        ),
        (
            "[web_search]\nbackend = \"searxng\"\n",
            "web_search.url",
            ":2:",
        ),
        (
            "[web_search]\nbackend = \"brave\"\n",
            "web_search.api_key_env",
            ":2:",
        ),
        ("[tools]\nprofile = \"admin\"\n", "tools.profile", ":2:"),
        (
            "[matrix]\nhomeserver = \"http://matrix.example.org\"\nuser_id = \"@bot:example.org\"\npassword_env = \"P\"\n",
            "matrix.homeserver",
            ":2:",
        ),
        (
            "[matrix]\nhomeserver = \"https://m.example.org\"\nuser_id = \"bot\"\npassword_env = \"P\"\n",
            "matrix.user_id",
            ":3:",
        ),
        (
            "[matrix]\nhomeserver = \"https://m.example.org\"\nuser_id = \"@bot:example.org\"\npassword_env = \"P\"\naccess_token_env = \"T\"\n",
            "matrix.password_env",
            ":3:",
        ),
        (
            "[matrix]\nhomeserver = \"https://m.example.org\"\nuser_id = \"@bot:example.org\"\npassword_env = \"P\"\nowners = [\"@me:example.org\",\n  \"me@example.org\"]\n",
            "matrix.owners[1]",
            ":6:",
        ),
        (
            "[matrix]\nhomeserver = \"https://m.example.org\"\nuser_id = \"@bot:example.org\"\naccess_token_file = \"/run/t\"\nrooms = [\"general\"]\n",
            "matrix.rooms[0]",
            ":5:",
        ),
        (
            "[telegram]\ntoken_env = \"T\"\ntoken_file = \"/run/t\"\n",
            "telegram.token_env",
            ":2:",
        ),
        (
            "[telegram]\ntoken_env = \"T\"\napi_url = \"http://bots.example.org\"\n",
            "telegram.api_url",
            ":3:",
        ),
        (
            "[telegram]\ntoken_env = \"T\"\nowners = [12345,\n  -100200]\n",
            "telegram.owners[1]",
            ":4:",
        ),
        (
            "[telegram]\ntoken_env = \"T\"\nallow_groups = [0]\n",
            "telegram.allow_groups[0]",
            ":3:",
        ),
        (
            "[owner.deliver]\ntelegrm = [\"answers\"]\n",
            "owner.deliver.telegrm",
            ":2:",
        ),
        (
            "[tools]\nuntrusted_roots = [\"downloads\"]\n",
            "tools.untrusted_roots[0]",
            ":2:",
        ),
        (
            "[[watch]]\nname = \"w\"\npath = \"/tmp\"\nexclude = [\"ok/**\", \"[broken\"]\n",
            "watch[0].exclude[1]",
            ":3:",
        ),
        (
            "[owner.deliver]\nemail = [\"notices\"]\nchat = [\"answers\"]\n",
            "owner.deliver.chat",
            ":3:",
        ),
        (
            "[owner.deliver]\nemail = [\"notices\",\n  \"reminders\"]\n",
            "owner.deliver.email[1]",
            ":3:",
        ),
        (
            "[tools.shell]\n\nsandbox = \"bubblewrap\"\n",
            "tools.shell.sandbox",
            ":3:",
        ),
        (
            "[owner]\noutbox_retention_days = 0\n",
            "owner.outbox_retention_days",
            ":2:",
        ),
        (
            "[inbox]\ndedupe_retention_days = 0.0001\n",
            "inbox.dedupe_retention_days",
            ":2:",
        ),
        (
            "[tools]\n\nledger_retention_days = 4000\n",
            "tools.ledger_retention_days",
            ":3:",
        ),
        (
            "[trajectory]\nretention_days = nan\n",
            "trajectory.retention_days",
            ":2:",
        ),
        (
            "[tools]\ndefer_threshold_pct = 101\n",
            "tools.defer_threshold_pct",
            ":2:",
        ),
        (
            "[[mcp.servers]]\nname = \"a b\"\ncommand = \"x\"\n",
            "mcp.servers[0].name",
            ":2:",
        ),
        (
            "[[mcp.servers]]\nname = \"a\"\n",
            "mcp.servers[0].command",
            ":2:",
        ),
        (
            "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\nurl = \"http://h\"\n",
            "mcp.servers[0].command",
            ":2:",
        ),
        (
            "[[mcp.servers]]\nname = \"a\"\ncommand = \"x\"\n[[mcp.servers]]\nname = \"a\"\nurl = \"http://h/mcp\"\n",
            "mcp.servers[1].name",
            ":5:",
        ),
        (
            "[[mcp.servers]]\nname = \"a\"\nurl = \"ftp://h\"\n",
            "mcp.servers[0].url",
            ":3:",
        ),
        (
            "[daemon]\nlog_format = \"xml\"\n",
            "daemon.log_format",
            ":2:",
        ),
        ("[inbox]\ncapacity = 0\n", "inbox.capacity", ":2:"),
        ("colour = 1\n", "colour", ":1:"),
        ("[bogus]\nx = 1\n", "bogus", ":1:"),
        (
            "[[urgency.rules]]\nurgency = \"cancel\"\n\n[[urgency.rules]]\nsource = \"pager\"\nurgency = \"cancel\"\n",
            "urgency.rules[1].source",
            ":5:",
        ),
        (
            "[[urgency.rules]]\nurgency = \"now\"\n",
            "urgency.rules[0].urgency",
            ":2:",
        ),
        ("[[urgency.rules]]\nsource = \"user\"\n", "urgency", ""),
        (
            "[[urgency.rules]]\nurgency = \"queue\"\nequals = \"x\"\n",
            "urgency.rules[0].equals",
            "",
        ),
        ("[daemon\n", "", ":1:"),
        (
            "[tools]\nroots = [\"/ok\", \"relative/dir\"]\n",
            "tools.roots[1]",
            ":2:",
        ),
    ];
    for (text, key, line) in table {
        let message = error_of(text);
        assert!(
            message.contains(&format!("key `{key}")),
            "{text:?}: {message}"
        );
        if !key.is_empty() && !key.ends_with('.') && *key != "urgency" {
            assert!(
                message.contains(&format!("key `{key}`")),
                "{text:?}: {message}"
            );
        }
        assert!(
            message.contains(line),
            "{text:?} should point at line {line}: {message}"
        );
        assert!(message.starts_with("steward.toml"), "{message}");
    }
}

#[test]
fn a_full_config_resolves() {
    let text = r#"
[daemon]
shutdown_grace_secs = 3
socket_path = "/tmp/s.sock"
log_format = "json"

[inbox]
dedupe_retention_days = 1
capacity = 5

[dispatcher]
max_steps_per_turn = 2

[lanes]
max_parallel = 1

[[urgency.rules]]
source = "webhook"
channel = "webhook:*-alerts"
trust = "untrusted"
urgency = "cancel"

[[urgency.rules]]
field = "text"
equals = "stop"
urgency = "cancel"
"#;
    let config = Config::from_toml(text, None).unwrap();
    assert_eq!(config.daemon.log_format, LogFormat::Json);
    assert_eq!(
        config.daemon.socket_path,
        Some(PathBuf::from("/tmp/s.sock"))
    );
    assert_eq!(config.inbox.capacity, 5);
    assert_eq!(config.urgency_rules.len(), 2);
    assert_eq!(
        config.urgency_rules[0].source,
        Some(steward_events::Source::Webhook)
    );
    assert_eq!(
        config.urgency_rules[1]
            .field
            .as_ref()
            .map(|f| f.path.as_str()),
        Some("text")
    );
}

#[test]
fn a_missing_file_means_defaults_and_an_unreadable_one_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(Config::load(&dir.path().join("absent.toml")).unwrap(), None);
    let err = Config::load(dir.path()).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err}");
}

#[test]
fn anthropic_defaults_its_endpoint_and_window() {
    let config = Config::from_toml(
        "[model]\nprovider = \"anthropic\"\nmodel = \"claude-sonnet-4-5\"\napi_key_env = \"K\"\n",
        Some(Path::new("steward.toml")),
    )
    .unwrap();
    assert_eq!(config.model.provider, ModelProvider::Anthropic);
    assert_eq!(config.model.base_url, "https://api.anthropic.com/v1");
    assert_eq!(config.model.context_window_tokens, 200_000);
    assert_eq!(config.model.max_output_tokens, 4096);
}

#[test]
fn known_models_have_their_context_windows() {
    let table = [
        (ModelProvider::OpenAi, "gpt-4o-mini", 128_000),
        (ModelProvider::OpenAi, "openai/gpt-4.1", 1_047_576),
        (ModelProvider::OpenAi, "anthropic/claude-3.5-haiku", 200_000),
        (ModelProvider::OpenAi, "qwen2.5:7b", 32_768),
        (ModelProvider::Anthropic, "some-future-model", 200_000),
    ];
    for (provider, model, window) in table {
        assert_eq!(
            known_context_window(provider, model),
            window,
            "{provider:?} {model}"
        );
    }
}

#[test]
fn mcp_servers_resolve_to_their_transports() {
    let config = Config::from_toml(
        "[[mcp.servers]]\nname = \"files\"\ncommand = \"npx\"\nargs = [\"-y\", \"server\"]\nenv = { A = \"1\" }\nread_only_tools = [\"read\"]\n\n[[mcp.servers]]\nname = \"tracker\"\nurl = \"https://mcp.example.com/mcp\"\nbearer_token_env = \"T\"\ndefer = false\n",
        Some(Path::new("steward.toml")),
    )
    .unwrap();
    assert_eq!(config.mcp_servers.len(), 2);
    assert_eq!(
        config.mcp_servers[0].transport,
        McpTransport::Stdio {
            command: "npx".into(),
            args: vec!["-y".into(), "server".into()],
            env: vec![("A".into(), "1".into())],
        }
    );
    assert_eq!(config.mcp_servers[0].read_only_tools, ["read"]);
    assert!(config.mcp_servers[0].defer);
    assert_eq!(config.mcp_servers[0].call_timeout, Duration::from_secs(120));
    assert_eq!(
        config.mcp_servers[1].transport,
        McpTransport::Http {
            url: "https://mcp.example.com/mcp".into(),
            bearer_token_env: Some("T".into()),
        }
    );
    assert!(!config.mcp_servers[1].defer);
}

#[test]
fn every_commented_example_in_the_default_config_is_valid() {
    // Commented examples are `# key = value`, `# [table]` and `# [[table]]` lines; prose
    // comments are not.
    let uncommented = uncommented_default();
    let config =
        Config::from_toml(&uncommented, None).unwrap_or_else(|e| panic!("{e}\n{uncommented}"));
    assert_eq!(config.cron.len(), 2);
    assert_eq!(config.watch.len(), 1);
    assert_eq!(config.webhook_routes.len(), 1);
    assert!(config.http.is_some());
    assert_eq!(config.mcp_servers.len(), 2);
    assert_eq!(config.urgency_rules.len(), 1);
    assert_eq!(
        config.urgency_rules[0].urgency,
        steward_events::Urgency::Cancel
    );
    assert_eq!(config.tools.policy.len(), 1);
    let email = config.email.expect("the [email] example");
    assert_eq!(email.imap.port, 993);
    assert_eq!(email.smtp.port, 587);
    assert!(email.require_authentication);
}

/// The default config with every commented example line made real.
fn uncommented_default() -> String {
    DEFAULT_CONFIG_TOML
        .lines()
        .map(|line| {
            let example = line.strip_prefix("# ").filter(|rest| {
                rest.starts_with('[')
                    || rest.split_once(" = ").is_some_and(|(key, _)| {
                        key.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                    })
            });
            match (example, line) {
                (Some(rest), _) => rest.to_owned() + "\n",
                (None, "#") => "\n".to_owned(),
                (None, _) => line.to_owned() + "\n",
            }
        })
        .collect()
}

#[test]
fn the_schema_accepts_every_example_and_refuses_unknown_keys_and_wrong_types() {
    let schema = json_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let as_json = |text: &str| -> serde_json::Value { toml::from_str(text).unwrap() };
    let full = as_json(&uncommented_default());
    let problems: Vec<String> = validator
        .iter_errors(&full)
        .map(|e| e.to_string())
        .collect();
    assert!(problems.is_empty(), "{problems:?}");
    for (text, what) in [
        ("[daemon]\nshutdown_grace = 5\n", "an unknown key"),
        (
            "[lanes]\nmax_parallel = \"four\"\n",
            "a string for a number",
        ),
        ("[[cron]]\nschedule = \"@daily\"\n", "a job without a name"),
        (
            "[email]\nimap_host = \"x\"\n",
            "email without username and address",
        ),
    ] {
        assert!(!validator.is_valid(&as_json(text)), "{what}: {text}");
    }
}

#[test]
fn email_tls_modes_pick_their_ports_and_plain_text_stays_on_loopback() {
    let base = "[email]\nusername = \"a\"\npassword_env = \"P\"\naddress = \"a@example.com\"\n";
    let config = Config::from_toml(
        &format!("{base}imap_host = \"127.0.0.1\"\nimap_tls = \"none\"\nsmtp_tls = \"implicit\"\n"),
        None,
    )
    .unwrap();
    let email = config.email.unwrap();
    assert_eq!((email.imap.port, email.imap.tls), (143, MailTls::None));
    assert_eq!((email.smtp.port, email.smtp.tls), (465, MailTls::Implicit));
    assert_eq!(
        email.smtp.host, "127.0.0.1",
        "smtp_host defaults to imap_host"
    );
    assert_eq!(email.mailbox, "INBOX");
    assert_eq!(email.sent_mailbox, "Sent");
    assert_eq!(email.max_message_bytes, 10 * 1024 * 1024);
    assert!(
        email.dns_servers.is_empty(),
        "the system's resolver by default"
    );
    let with_dns = Config::from_toml(
        &format!("{base}imap_host = \"localhost\"\ndns_servers = [\"127.0.0.1:5353\", \"::1\", \"10.0.0.2\"]\n"),
        None,
    )
    .unwrap();
    assert_eq!(
        with_dns.email.unwrap().dns_servers,
        [
            "127.0.0.1:5353".parse().unwrap(),
            "[::1]:53".parse().unwrap(),
            "10.0.0.2:53".parse().unwrap()
        ]
    );

    let table: &[(&str, &str)] = &[
        (
            "imap_host = \"mail.example.com\"\nimap_tls = \"none\"\n",
            "email.imap_tls",
        ),
        (
            "imap_host = \"localhost\"\nsmtp_host = \"smtp.example.com\"\nsmtp_tls = \"none\"\n",
            "email.smtp_tls",
        ),
        (
            "imap_host = \"localhost\"\nimap_tls = \"ssl\"\n",
            "email.imap_tls",
        ),
        (
            "imap_host = \"localhost\"\nunknown_senders = \"drop\"\n",
            "email.unknown_senders",
        ),
        (
            "imap_host = \"localhost\"\nimap_port = 70000\n",
            "email.imap_port",
        ),
        (
            "imap_host = \"localhost\"\ndns_servers = [\"127.0.0.1:5353\", \"dns.example.com\"]\n",
            "email.dns_servers[1]",
        ),
    ];
    for (extra, key) in table {
        let error = error_of(&format!("{base}{extra}"));
        assert!(error.contains(key), "{extra}: {error}");
    }
    let error = error_of(
        "[email]\nimap_host = \"localhost\"\nusername = \"a\"\naddress = \"a@example.com\"\n",
    );
    assert!(error.contains("password_env"), "{error}");
    let error = error_of(
        "[email]\nimap_host = \"localhost\"\nusername = \"a\"\npassword_env = \"P\"\naddress = \"nobody\"\n",
    );
    assert!(error.contains("email.address"), "{error}");
}

#[test]
fn secret_files_may_live_in_systemds_credentials_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("email-password"), "s3cret\n").unwrap();
    let credentials = Some(dir.path().as_os_str().to_owned());
    for written in [
        "$CREDENTIALS_DIRECTORY/email-password",
        "${CREDENTIALS_DIRECTORY}/email-password",
    ] {
        let path = credentials_path(Path::new(written), credentials.clone()).unwrap();
        assert_eq!(path, dir.path().join("email-password"));
    }
    let plain = credentials_path(Path::new("/etc/steward/pw"), credentials).unwrap();
    assert_eq!(plain, Path::new("/etc/steward/pw"));
    let unset = credentials_path(Path::new("$CREDENTIALS_DIRECTORY/pw"), None).unwrap_err();
    assert!(unset.contains("LoadCredential"), "{unset}");
}

#[test]
fn retentions_take_whole_or_fractional_days_and_the_trajectory_keeps_everything_by_default() {
    let config = Config::default();
    assert_eq!(config.trajectory.retention, None);
    assert_eq!(
        config.tools.ledger_retention,
        Duration::from_secs(7 * 86_400)
    );
    let table: &[(&str, Duration)] = &[
        ("1", Duration::from_secs(86_400)),
        ("0.5", Duration::from_secs(43_200)),
        ("0.001", Duration::from_millis(86_400)),
    ];
    for (days, expected) in table {
        let text = format!(
            "[inbox]\ndedupe_retention_days = {days}\n[tools]\nledger_retention_days = {days}\n[trajectory]\nretention_days = {days}\n"
        );
        let config = Config::from_toml(&text, None).unwrap();
        assert_eq!(config.inbox.dedupe_retention, *expected, "{days}");
        assert_eq!(config.tools.ledger_retention, *expected, "{days}");
        assert_eq!(config.trajectory.retention, Some(*expected), "{days}");
    }
}

#[test]
fn owner_delivery_rules_route_named_channels_only() {
    use steward_events::DeliveryClass::*;
    let config = Config::from_toml(
        "[owner.deliver]\nemail = [\"confirmations\", \"notices\"]\nhttp = []\n",
        None,
    )
    .unwrap();
    let rules = &config.owner.deliver;
    assert!(rules.delivers("email", Confirmations) && rules.delivers("email", Notices));
    assert!(!rules.delivers("email", Answers));
    assert!(!rules.delivers("http", Notices));
    assert!(rules.delivers("socket", Answers));
    assert_eq!(
        Config::default().owner.outbox_retention,
        Duration::from_secs(90 * 86_400)
    );
    assert!(Config::default().owner.deliver.delivers("email", Answers));
}

#[test]
fn a_matrix_account_resolves_with_its_defaults() {
    let config = Config::from_toml(
        "[matrix]\nhomeserver = \"http://127.0.0.1:8008/\"\nuser_id = \"@steward:localhost\"\naccess_token_file = \"/run/credentials/steward/matrix\"\nowners = [\"@me:localhost\"]\ntrusted = [\"*:example.org\", \"@friend:matrix.org\"]\nrooms = [\"!abc:localhost\", \"#family:localhost\"]\n",
        None,
    )
    .unwrap();
    let matrix = config.matrix.unwrap();
    assert_eq!(matrix.homeserver, "http://127.0.0.1:8008");
    assert_eq!(
        matrix.login,
        crate::MatrixLogin::AccessToken(crate::SecretSource::File(
            "/run/credentials/steward/matrix".into()
        ))
    );
    assert_eq!(matrix.device_name, "steward");
    assert_eq!(matrix.trusted, ["*:example.org", "@friend:matrix.org"]);
    assert_eq!(matrix.rooms.len(), 2);
    assert!(matrix.e2ee && matrix.mention_required_in_groups && !matrix.require_verified_devices);
    assert_eq!(matrix.keys_wait, Duration::from_secs(600));
}

#[test]
fn the_matrix_keys_wait_is_a_second_to_a_week() {
    let account = "[matrix]\nhomeserver = \"http://127.0.0.1:8008\"\nuser_id = \"@steward:localhost\"\npassword_env = \"P\"\n";
    let with = |secs: &str| Config::from_toml(&format!("{account}keys_wait_secs = {secs}\n"), None);
    assert_eq!(
        with("5").unwrap().matrix.unwrap().keys_wait,
        Duration::from_secs(5)
    );
    assert!(with("604800").is_ok());
    for bad in ["0", "604801"] {
        let error = with(bad).unwrap_err().to_string();
        assert!(
            error.starts_with("config:5: key `matrix.keys_wait_secs`: ")
                && error.contains("out of range"),
            "{error}"
        );
    }
}

#[test]
fn a_telegram_bot_resolves_with_its_defaults() {
    let config = Config::from_toml(
        "[telegram]\ntoken_file = \"/run/credentials/steward/telegram\"\nowners = [12345]\ntrusted = [777]\nallow_groups = [-1001234]\n",
        None,
    )
    .unwrap();
    let telegram = config.telegram.unwrap();
    assert_eq!(telegram.api_url, "https://api.telegram.org");
    assert_eq!(
        telegram.token,
        crate::SecretSource::File("/run/credentials/steward/telegram".into())
    );
    assert_eq!(telegram.token_key(), "telegram.token_file");
    assert_eq!(
        (telegram.owners, telegram.trusted, telegram.allow_groups),
        (vec![12345], vec![777], vec![-1001234])
    );
    assert!(telegram.mention_required_in_groups);
    let local = Config::from_toml(
        "[telegram]\ntoken_env = \"T\"\napi_url = \"http://127.0.0.1:9999/\"\n",
        None,
    )
    .unwrap();
    assert_eq!(local.telegram.unwrap().api_url, "http://127.0.0.1:9999");
}

#[test]
fn model_profiles_prices_and_caps_resolve() {
    let config = Config::from_toml(
        "[model]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"big\"\nprice_in_per_mtok = 3.0\n\
         [models.cheap]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"small\"\n\
         [[watch]]\nname = \"w\"\npath = \"/tmp\"\nmodel = \"cheap\"\nmax_tokens_per_run = 5000\n\
         [budget]\ndaily_cost = 2.5\n[usage]\nretention_days = 30\n",
        None,
    )
    .unwrap();
    assert_eq!(config.models["cheap"].model, "small");
    assert_eq!(config.models["cheap"].prices, None);
    let prices = config.model.prices.unwrap();
    assert_eq!(
        (
            prices.in_per_mtok,
            prices.cached_per_mtok,
            prices.out_per_mtok
        ),
        (3.0, 3.0, 0.0)
    );
    assert_eq!(config.watch[0].run.model.as_deref(), Some("cheap"));
    assert_eq!(config.watch[0].run.max_tokens_per_run, Some(5000));
    assert_eq!(config.budget.daily_cost, Some(2.5));
    assert_eq!(config.usage.retention, Duration::from_secs(30 * 86_400));
}
